// A .jsonl SFT data file (prompt/response, chat messages or pre-tokenised
// lines), read with the byte-level tokenizer.
#include "data/byte_tokenizer.h"
#include "data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tessel::data::ByteTokenizer tokenizer(300);
  const auto path = tessel::fuzz::write_scratch("input.jsonl", data, size);
  tessel::data::DatasetOptions options;
  options.vocab_size = 300;
  options.sequence.max_input_seq_length = 64;
  tessel::fuzz::expect_only_tessel_errors(
      [&] { (void)tessel::data::load_jsonl_dataset(path.string(), &tokenizer, options); });
  return 0;
}
