// Config: the value type every layer reads its settings from. A Config is one
// node of a YAML-like tree (null, bool, int, float, string, list, or an
// ordered mapping). It has plain value semantics: copying a Config copies the
// whole tree, so a layer holding a sub-config never sees later edits of the
// caller's tree (yaml-cpp nodes alias on copy, which is why they are only used
// for parsing and printing).
//
// Paths are dotted ("policy.dtensor_cfg.tensor_parallel_size"); a segment of
// digits indexes a list ("data.train.0.name"). Typed reads (get<T>) throw
// tessel::UsageError naming the key, the expected type and the value found,
// because a wrong config value is the user's to fix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessel::config {

enum class Kind { Null, Bool, Int, Float, String, List, Map };

class Config;

// Type conversion for Config::get<T>; specialised below for the supported T:
// bool, int, int64_t, double, std::string, Config, std::optional<T> (null ->
// nullopt) and std::vector<T>.
template <typename T>
struct Decoder;

class Config {
 public:
  using Entry = std::pair<std::string, Config>;

  Config();  // an empty mapping (the usual root)
  Config(std::nullptr_t);
  Config(bool value);
  template <typename I,
            std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Config(I value) : kind_(Kind::Int), i_(static_cast<int64_t>(value)) {}
  Config(double value);
  Config(std::string value);
  Config(const char* value);

  static Config null() { return Config(nullptr); }
  static Config map() { return Config(); }
  static Config list(std::vector<Config> items = {});

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_map() const { return kind_ == Kind::Map; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_scalar() const { return kind_ != Kind::Map && kind_ != Kind::List; }

  // --- Path access -------------------------------------------------------
  bool has(std::string_view path) const;
  // The node at `path`, or nullptr when any segment is missing.
  const Config* find(std::string_view path) const;
  Config* find(std::string_view path);
  // The node at `path`; UsageError "missing config key '...'" (with the
  // closest existing keys) when it does not exist.
  const Config& at(std::string_view path) const;

  template <typename T>
  T get(std::string_view path) const {
    return Decoder<T>::decode(at(path), path);
  }
  // `fallback` when the key is missing (a present key of the wrong type is
  // still an error: a typo'd value should never silently become the default).
  template <typename T>
  T get_or(std::string_view path, T fallback) const {
    const Config* node = find(path);
    return node ? Decoder<T>::decode(*node, path) : std::move(fallback);
  }
  // The mapping at `path` (a copy); UsageError if missing or not a mapping.
  Config sub(std::string_view path) const;

  // Sets `path` to `value`, creating missing intermediate mappings. A list
  // index must already exist. Throws UsageError when a parent is a scalar.
  void set(std::string_view path, Config value);
  // Removes `path`; returns false when it did not exist.
  bool erase(std::string_view path);

  // --- Mapping / list access ---------------------------------------------
  // Keys of a mapping in file order (empty for other kinds).
  std::vector<std::string> keys() const;
  const std::vector<Entry>& entries() const { return entries_; }  // mapping
  const std::vector<Config>& items() const { return items_; }     // list
  std::vector<Entry>& entries() { return entries_; }
  std::vector<Config>& items() { return items_; }
  size_t size() const;  // entries of a mapping, items of a list, 0 otherwise
  const Config* child(std::string_view key) const;  // direct child, no dots
  Config* child(std::string_view key);

  // --- Scalars (precondition: matching kind) ----------------------------
  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_float() const { return f_; }
  const std::string& as_string() const { return s_; }

  // --- Printing -----------------------------------------------------------
  // Block YAML that loads back to an equal Config (strings that would read
  // as another type are quoted). Used to print the resolved config of a run.
  std::string to_yaml() const;
  // One-line flow form: `3`, `'abc'`, `[1, 2]`, `{a: 1}` (for messages).
  std::string to_flow() const;
  // Scalar as plain text (`3`, `abc`, `true`, `null`); flow form otherwise.
  std::string to_text() const;
  // "an integer", "a string", ... (for messages).
  static const char* kind_name(Kind kind);

  // The file the root was loaded from ("" when built in code); kept by
  // copies and sub() so file-relative lookups (custom plans) can find it.
  const std::string& source_path() const { return source_; }
  void set_source_path(std::string path) { source_ = std::move(path); }

  friend bool operator==(const Config& a, const Config& b);

 private:
  Kind kind_ = Kind::Map;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0.0;
  std::string s_;
  std::vector<Config> items_;
  std::vector<Entry> entries_;
  std::string source_;
};

// Splits "a.b.0" into {"a", "b", "0"}; UsageError on an empty segment.
std::vector<std::string> split_path(std::string_view path);

// Error helper for decoders: "<path>: expected <what>, got <value>".
[[noreturn]] void throw_type_error(std::string_view path, std::string_view expected,
                                   const Config& got);

template <>
struct Decoder<bool> {
  static bool decode(const Config& node, std::string_view path);
};
template <>
struct Decoder<int64_t> {
  static int64_t decode(const Config& node, std::string_view path);
};
template <>
struct Decoder<int> {
  static int decode(const Config& node, std::string_view path);
};
template <>
struct Decoder<double> {
  static double decode(const Config& node, std::string_view path);
};
template <>
struct Decoder<std::string> {
  static std::string decode(const Config& node, std::string_view path);
};
template <>
struct Decoder<Config> {
  static Config decode(const Config& node, std::string_view) { return node; }
};
template <typename T>
struct Decoder<std::optional<T>> {
  static std::optional<T> decode(const Config& node, std::string_view path) {
    if (node.is_null()) return std::nullopt;
    return Decoder<T>::decode(node, path);
  }
};
template <typename T>
struct Decoder<std::vector<T>> {
  static std::vector<T> decode(const Config& node, std::string_view path) {
    if (!node.is_list()) throw_type_error(path, "a list", node);
    std::vector<T> out;
    out.reserve(node.items().size());
    for (size_t i = 0; i < node.items().size(); ++i) {
      std::string item_path = std::string(path) + "." + std::to_string(i);
      out.push_back(Decoder<T>::decode(node.items()[i], item_path));
    }
    return out;
  }
};

}  // namespace tessel::config
