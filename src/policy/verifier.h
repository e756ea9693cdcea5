// Rewards from rules (SPEC 11, GRPO's environment): a verifier scores a
// response against the prompt's reference answer, with no model and no
// download. NeMo RL runs such checks in its environments (env.math); tessel
// calls a verifier in the training processes, on every rank alike.
//
// Built in (env.verifier):
//   exact_match   1 when the response's final answer, its text with
//                 surrounding whitespace removed, equals the reference answer
//                 (whitespace removed too), else 0: the demo tasks (sums,
//                 reversed and uppercased words)
//   final_number  1 when the last number in the response (an optional sign,
//                 digits, an optional decimal part) equals the reference
//                 answer's number, else 0: "... so the answer is 42"
// A verifier of one's own derives from Verifier and is passed to the GRPO
// recipe (policy/grpo_recipe.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace tessel::policy {

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual std::string name() const = 0;
  // The reward of `response` (the generated text, the stop token removed)
  // for a prompt whose reference answer is `answer`.
  virtual double reward(const std::string& response, const std::string& answer) const = 0;
};

// The built-in verifiers' names.
const std::vector<std::string>& verifier_names();

// The built-in verifier `name`; UsageError naming `key` and the choices otherwise.
std::unique_ptr<Verifier> make_verifier(const std::string& name, const std::string& key);

}  // namespace tessel::policy
