// A tensor-parallel plan: an ordered list of (module pattern, style). A style
// is either a Hugging Face style string ("colwise", "rowwise", ...; see
// hf_styles.h), translated when the plan is applied, or a style object built
// in C++ (ColwiseParallel, SequenceParallel, ...; style.h) for what no string
// can express.
//
// This header is deliberately header-only and free of libtorch: a compiled
// plan plugin (`path/libplan.so:symbol`, SPEC 3) includes it and fills a Plan
// through the inline add() without linking any tessel library, so the plugin
// and the program only need to agree on these standard-library types (same
// compiler and standard library, as for any C++ plugin).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::parallel {

class Style;
using StylePtr = std::shared_ptr<const Style>;

struct PlanEntry {
  std::string pattern;       // "model.layers.*.self_attn.q_proj"
  std::string style_string;  // HF vocabulary; used when `style` is null
  StylePtr style;            // a style object; wins over style_string
};

struct Plan {
  std::vector<PlanEntry> entries;

  void add(std::string pattern, std::string style_string) {
    entries.push_back(PlanEntry{std::move(pattern), std::move(style_string), nullptr});
  }
  void add(std::string pattern, StylePtr style) {
    entries.push_back(PlanEntry{std::move(pattern), std::string(), std::move(style)});
  }
  bool empty() const { return entries.empty(); }
  std::size_t size() const { return entries.size(); }
};

// The signature of a plan plugin's symbol: `extern "C" void symbol(Plan*)`.
using PlanPluginFn = void (*)(Plan*);

}  // namespace tessel::parallel
