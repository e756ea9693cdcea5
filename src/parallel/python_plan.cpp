#include "parallel/python_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "config/suggest.h"
#include "core/error.h"
#include "parallel/colwise.h"
#include "parallel/hf_styles.h"
#include "parallel/plan_file_imports.h"
#include "parallel/prepare_module.h"
#include "parallel/rowwise.h"
#include "parallel/sequence_parallel.h"

namespace tessel::parallel {

namespace fs = std::filesystem;
using config::PyValue;
using tensor::Layout;
using Kind = config::PyValue::Kind;

config::PyModule read_python_plan_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read plan file {}", file.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return config::parse_python_data(text.str(), file.string(), plan_file_imports());
}

namespace {

const std::vector<std::string>& style_names() {
  static const std::vector<std::string> names = {"ColwiseParallel", "RowwiseParallel", "SequenceParallel",
                                                 "PrepareModuleInput", "PrepareModuleOutput"};
  return names;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Reads one style call: keyword arguments only (as torch's styles take them),
// each at most once, each one this style knows.
class StyleCall {
 public:
  StyleCall(const PyValue& call, const std::string& file, std::vector<std::string> keywords)
      : call_(call), file_(file), keywords_(std::move(keywords)) {
    if (!call.items.empty()) {
      fail(call.items.front(), fmt::format("{} takes keyword arguments only ({}), as in torch", call.spelled,
                                           keywords_.empty() ? "none" : join(keywords_)));
    }
    for (const auto& kw : call.keywords) {
      if (std::find(keywords_.begin(), keywords_.end(), kw.name) == keywords_.end()) {
        config::throw_python_error(
            file_, kw.pos,
            fmt::format("{} has no keyword argument '{}'.{} Its keyword arguments: {}", call.spelled, kw.name,
                        config::did_you_mean(config::closest_names(keywords_, kw.name)), join(keywords_)));
      }
    }
  }

  const PyValue* get(const std::string& name) const {
    for (const auto& kw : call_.keywords) {
      if (kw.name == name && !kw.value.is(Kind::None)) return &kw.value;
    }
    return nullptr;
  }

  bool flag(const std::string& name, bool fallback) const {
    const PyValue* v = get(name);
    if (v == nullptr) return fallback;
    if (!v->is(Kind::Bool)) fail(*v, fmt::format("{}'s {} must be True or False, got {}", call_.spelled, name, v->describe()));
    return v->boolean;
  }

  [[noreturn]] void fail(const PyValue& at, const std::string& message) const {
    config::throw_python_error(file_, at.pos, message);
  }
  const PyValue& call() const { return call_; }
  const std::string& file() const { return file_; }

 private:
  const PyValue& call_;
  const std::string& file_;
  std::vector<std::string> keywords_;
};

// Replicate(), Shard(d) / Shard(dim=d), Partial() / Partial("sum").
Layout layout_of(const PyValue& v, const std::string& file, const std::string& what) {
  auto fail = [&](const std::string& m) { config::throw_python_error(file, v.pos, m); };
  if (!v.is(Kind::Call) || (v.text != "Replicate" && v.text != "Shard" && v.text != "Partial")) {
    fail(fmt::format("{} must be a layout: Replicate(), Shard(dim) or Partial(); got {}", what, v.describe()));
  }
  const auto& args = v.items;
  if (v.text == "Replicate") {
    if (!args.empty() || !v.keywords.empty()) fail("Replicate() takes no arguments");
    return Layout::replicate();
  }
  if (v.text == "Shard") {
    const PyValue* dim = nullptr;
    if (args.size() == 1 && v.keywords.empty()) dim = &args[0];
    if (args.empty() && v.keywords.size() == 1 && v.keywords[0].name == "dim") dim = &v.keywords[0].value;
    if (dim == nullptr) fail("Shard takes one argument, the dimension: Shard(1), Shard(-1) or Shard(dim=1)");
    if (!dim->is(Kind::Int)) config::throw_python_error(file, dim->pos, "Shard's dimension must be an integer, got " + dim->describe());
    if (dim->integer < -8 || dim->integer > 7) {
      config::throw_python_error(file, dim->pos, fmt::format("Shard({}): activations have at most 8 dimensions", dim->integer));
    }
    return Layout::shard(dim->integer);
  }
  const PyValue* op = nullptr;
  if (args.size() == 1 && v.keywords.empty()) op = &args[0];
  if (args.empty() && v.keywords.size() == 1 && v.keywords[0].name == "reduce_op") op = &v.keywords[0].value;
  if (op == nullptr && (!args.empty() || !v.keywords.empty())) fail("Partial takes at most reduce_op: Partial() or Partial(\"sum\")");
  if (op != nullptr && !(op->is(Kind::Str) && op->text == "sum")) {
    config::throw_python_error(file, op->pos, fmt::format("Partial({}): only sum partials are supported (what "
                                                          "tensor-parallel modules produce)", op->describe()));
  }
  return Layout::partial();
}

// One layout where torch's style takes one (a tuple is refused: torch would
// wrap it in another tuple and fail at run time).
std::optional<Layout> single_layout(const StyleCall& c, const std::string& key) {
  const PyValue* v = c.get(key);
  if (v == nullptr) return std::nullopt;
  if (v->is(Kind::Tuple) || v->is(Kind::List)) {
    c.fail(*v, fmt::format("{}'s {} takes one layout, not {} (e.g. {}=Shard(-1))", c.call().spelled, key,
                           v->describe(), key));
  }
  return layout_of(*v, c.file(), fmt::format("{}'s {}", c.call().spelled, key));
}

void refuse(const StyleCall& c, const std::string& key, const Layout& l, const std::string& why) {
  c.fail(*c.get(key), fmt::format("{} cannot take {}={}: {}", c.call().spelled, key, l.to_string(), why));
}

StylePtr colwise(const PyValue& v, const std::string& file) {
  const StyleCall c(v, file, {"input_layouts", "output_layouts", "use_local_output"});
  ColwiseOptions o;
  if (auto in = single_layout(c, "input_layouts")) o.input_layout = *in;
  if (auto out = single_layout(c, "output_layouts")) {
    if (out->is_partial()) refuse(c, "output_layouts", *out, "a column-parallel output is sharded or gathered (Shard(-1) or Replicate())");
    o.output_layout = *out;
  }
  o.use_local_output = c.flag("use_local_output", true);
  return std::make_shared<ColwiseParallel>(o);
}

StylePtr rowwise(const PyValue& v, const std::string& file) {
  const StyleCall c(v, file, {"input_layouts", "output_layouts", "use_local_output"});
  RowwiseOptions o;
  if (auto in = single_layout(c, "input_layouts")) {
    if (in->is_partial()) refuse(c, "input_layouts", *in, "reduce the input first (PrepareModuleInput to Replicate())");
    o.input_layout = *in;
  }
  if (auto out = single_layout(c, "output_layouts")) o.output_layout = *out;
  o.use_local_output = c.flag("use_local_output", true);
  return std::make_shared<RowwiseParallel>(o);
}

StylePtr sequence_parallel(const PyValue& v, const std::string& file) {
  const StyleCall c(v, file, {"sequence_dim", "use_local_output"});
  int64_t dim = 1;
  if (const PyValue* d = c.get("sequence_dim")) {
    if (!d->is(Kind::Int)) c.fail(*d, "SequenceParallel's sequence_dim must be an integer, got " + d->describe());
    dim = d->integer;
  }
  (void)c.flag("use_local_output", false);  // the output stays a tagged sequence shard either way
  return std::make_shared<SequenceParallel>(dim);
}

// A layout list: one layout, or a tuple/list of layouts and Nones.
Layouts layout_list(const StyleCall& c, const std::string& key) {
  const PyValue* v = c.get(key);
  if (v == nullptr) return {};
  const std::string what = fmt::format("{}'s {}", c.call().spelled, key);
  if (!v->is(Kind::Tuple) && !v->is(Kind::List)) return {layout_of(*v, c.file(), what)};
  Layouts out;
  for (const auto& item : v->items) {
    out.push_back(item.is(Kind::None) ? std::nullopt : std::optional<Layout>(layout_of(item, c.file(), what)));
  }
  return out;
}

// The keyword inputs HF passes and where tessel's modules take them. Every
// tessel module takes the hidden states as input 0; the others are
// replicated on every rank.
constexpr const char* kHiddenNames[] = {"hidden_states", "x", "input"};
constexpr const char* kReplicatedNames[] = {"position_embeddings", "attention_mask", "position_ids",
                                            "cache_position",      "past_key_values", "past_key_value",
                                            "use_cache",           "output_attentions"};

std::vector<std::string> known_kwarg_names() {
  std::vector<std::string> out;
  for (const char* n : kHiddenNames) out.emplace_back(n);
  for (const char* n : kReplicatedNames) out.emplace_back(n);
  return out;
}

// name -> layout (or None) of an input_kwarg_layouts-style dict.
std::map<std::string, std::pair<const PyValue*, std::optional<Layout>>> kwarg_layouts(const StyleCall& c,
                                                                                        const std::string& key) {
  std::map<std::string, std::pair<const PyValue*, std::optional<Layout>>> out;
  const PyValue* v = c.get(key);
  if (v == nullptr) return out;
  if (!v->is(Kind::Dict)) c.fail(*v, fmt::format("{}'s {} must be a dict of input name -> layout, got {}", c.call().spelled, key, v->describe()));
  for (const auto& e : v->entries) {
    if (!e.key.is(Kind::Str)) c.fail(e.key, fmt::format("{}'s {}: keys are input names (strings), got {}", c.call().spelled, key, e.key.describe()));
    const auto names = known_kwarg_names();
    if (std::find(names.begin(), names.end(), e.key.text) == names.end()) {
      c.fail(e.key, fmt::format("{}'s {}: tessel's modules take no input named '{}'.{} Known: {}", c.call().spelled,
                                key, e.key.text, config::did_you_mean(config::closest_names(names, e.key.text)),
                                join(names)));
    }
    if (out.count(e.key.text)) c.fail(e.key, fmt::format("{}'s {}: '{}' appears twice", c.call().spelled, key, e.key.text));
    out[e.key.text] = {&e.key, e.value.is(Kind::None) ? std::nullopt
                                                      : std::optional<Layout>(layout_of(e.value, c.file(), key))};
  }
  return out;
}

StylePtr prepare_input(const PyValue& v, const std::string& file) {
  const StyleCall c(v, file, {"input_layouts", "desired_input_layouts", "input_kwarg_layouts",
                              "desired_input_kwarg_layouts", "use_local_output"});
  Layouts from = layout_list(c, "input_layouts"), to = layout_list(c, "desired_input_layouts");
  if (from.size() != to.size()) {
    c.fail(v, fmt::format("PrepareModuleInput: {} input_layouts but {} desired_input_layouts; give one desired layout "
                          "per input layout", from.size(), to.size()));
  }
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i].has_value() != to[i].has_value()) {
      c.fail(v, fmt::format("PrepareModuleInput: input {} has layout {} but desired {}; give both or None for both",
                            i, from[i] ? from[i]->to_string() : "None", to[i] ? to[i]->to_string() : "None"));
    }
  }
  const auto kw_from = kwarg_layouts(c, "input_kwarg_layouts"), kw_to = kwarg_layouts(c, "desired_input_kwarg_layouts");
  for (const auto& [name, entry] : kw_from) {
    if (!kw_to.count(name)) c.fail(*entry.first, fmt::format("PrepareModuleInput: '{}' has an input layout but no desired one in desired_input_kwarg_layouts", name));
  }
  for (const auto& [name, entry] : kw_to) {
    const auto it = kw_from.find(name);
    if (it == kw_from.end()) c.fail(*entry.first, fmt::format("PrepareModuleInput: '{}' has a desired layout but no input layout in input_kwarg_layouts", name));
    const auto& a = it->second.second;
    const auto& b = entry.second;
    const bool hidden = std::find(std::begin(kHiddenNames), std::end(kHiddenNames), name) != std::end(kHiddenNames);
    if (!hidden) {
      const auto replicated_or_none = [](const std::optional<Layout>& l) { return !l || l->is_replicate(); };
      if (!replicated_or_none(a) || !replicated_or_none(b)) {
        c.fail(*entry.first, fmt::format("PrepareModuleInput: '{}' is replicated on every rank in tessel's modules; "
                                         "only the hidden states (hidden_states / x / input) can be redistributed",
                                         name));
      }
      continue;
    }
    if (a.has_value() != b.has_value()) {
      c.fail(*entry.first, fmt::format("PrepareModuleInput: '{}' needs a layout in both input_kwarg_layouts and "
                                       "desired_input_kwarg_layouts (or None in both)", name));
    }
    if (!a) continue;
    if (!from.empty() && from[0]) {
      c.fail(*entry.first, fmt::format("PrepareModuleInput: '{}' is the module's first input, which input_layouts "
                                       "already gives a layout", name));
    }
    if (from.empty()) {
      from.resize(1);
      to.resize(1);
    }
    from[0] = a;
    to[0] = b;
  }
  return std::make_shared<PrepareModuleInput>(std::move(from), std::move(to), c.flag("use_local_output", false));
}

StylePtr prepare_output(const PyValue& v, const std::string& file) {
  const StyleCall c(v, file, {"output_layouts", "desired_output_layouts", "use_local_output"});
  if (!c.get("output_layouts") || !c.get("desired_output_layouts")) {
    c.fail(v, "PrepareModuleOutput needs output_layouts and desired_output_layouts");
  }
  Layouts from = layout_list(c, "output_layouts"), to = layout_list(c, "desired_output_layouts");
  if (from.size() != to.size()) {
    c.fail(v, fmt::format("PrepareModuleOutput: {} output_layouts but {} desired_output_layouts", from.size(), to.size()));
  }
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i].has_value() != to[i].has_value()) {
      c.fail(v, fmt::format("PrepareModuleOutput: output {} has a layout on one side only; give both or None for both", i));
    }
  }
  return std::make_shared<PrepareModuleOutput>(std::move(from), std::move(to), c.flag("use_local_output", true));
}

// One dict value of a plan: a style call or an HF style string.
void add_entry(Plan& plan, const std::string& pattern, const PyValue& v, const std::string& file) {
  if (v.is(Kind::Str)) {
    try {
      (void)style_from_string(v.text);  // the name is checked now; the head's form is chosen when applied
    } catch (const UsageError& e) {
      config::throw_python_error(file, v.pos, e.what());
    }
    plan.add(pattern, v.text);
    return;
  }
  if (!v.is(Kind::Call)) {
    config::throw_python_error(file, v.pos, fmt::format("the style of '{}' must be a style such as ColwiseParallel() "
                                                        "or an HF style string, got {}", pattern, v.describe()));
  }
  const std::string& name = v.text;
  if (name == "ColwiseParallel") return plan.add(pattern, colwise(v, file));
  if (name == "RowwiseParallel") return plan.add(pattern, rowwise(v, file));
  if (name == "SequenceParallel") return plan.add(pattern, sequence_parallel(v, file));
  if (name == "PrepareModuleInput") return plan.add(pattern, prepare_input(v, file));
  if (name == "PrepareModuleOutput") return plan.add(pattern, prepare_output(v, file));
  const std::string why = name == "Replicate" || name == "Shard" || name == "Partial"
                              ? fmt::format("{}() is a layout, not a style", v.spelled)
                              : fmt::format("{} is a type for annotations, not a style", v.spelled);
  config::throw_python_error(file, v.pos, fmt::format("the style of '{}': {}. Styles: {}", pattern, why, join(style_names())));
}

}  // namespace

Plan plan_from_python(const config::PyModule& module, const std::string& name) {
  const config::PyAssignment* binding = module.find(name);
  TESSEL_CHECK(binding != nullptr, "plan_from_python: {} binds no '{}'", module.source_name, name);
  const std::string& file = module.source_name;
  const PyValue& v = binding->value;
  if (!v.is(Kind::Dict) || v.entries.empty()) {
    config::throw_python_error(file, v.pos, fmt::format("'{}' must be a non-empty dict of module pattern -> style, got {}",
                                                        name, v.is(Kind::Dict) ? "an empty dict" : v.describe()));
  }
  Plan plan;
  std::map<std::string, config::SourcePos> seen;
  for (const auto& e : v.entries) {
    if (!e.key.is(Kind::Str) || e.key.text.empty()) {
      config::throw_python_error(file, e.key.pos, fmt::format("plan keys are module patterns such as "
                                                              "\"model.layers.*.mlp\", got {}", e.key.describe()));
    }
    if (const auto it = seen.find(e.key.text); it != seen.end()) {
      config::throw_python_error(file, e.key.pos, fmt::format("'{}' appears twice in '{}' (first at line {}); Python "
                                                              "would keep only the last one silently", e.key.text,
                                                              name, it->second.line));
    }
    seen[e.key.text] = e.key.pos;
    add_entry(plan, e.key.text, e.value, file);
  }
  return plan;
}

}  // namespace tessel::parallel
