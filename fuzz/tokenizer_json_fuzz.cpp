// tokenizer.json of a model directory (Hugging Face tokenizers' BPE), then
// a text with letters, digits, spaces, a newline and multi-byte characters
// encoded and decoded with what was read.
#include "data/bpe_tokenizer.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::fuzz::write_scratch("tokenizer.json", data, size);
  tessel::fuzz::expect_only_tessel_errors([&] {
    std::string why;
    const auto tokenizer = tessel::data::read_bpe_tokenizer(tessel::fuzz::scratch_dir(), why);
    if (!tokenizer) return;
    const auto ids = tokenizer->encode("hello world 123\n\xc3\xa9t\xc3\xa9 <|endoftext|>");
    (void)tokenizer->decode(ids);
  });
  return 0;
}
