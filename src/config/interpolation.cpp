#include "config/interpolation.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>

#include "config/scalar.h"
#include "config/suggest.h"
#include "core/error.h"
#include "core/text.h"

namespace tessel::config {

namespace {

std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

// Index just past the '}' closing the "${" at `open`, or npos.
size_t closing_brace(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      ++depth;
      ++i;
    } else if (text[i] == '}') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

class Resolver {
 public:
  explicit Resolver(Config& root) : root_(root) {}

  void resolve_tree(const std::string& path) {
    Config* node = path.empty() ? &root_ : root_.find(path);
    if (!node) return;
    if (node->kind() == Kind::String) {
      resolve_string_at(path);
    } else if (node->is_map()) {
      for (const auto& key : node->keys()) resolve_tree(join(path, key));
    } else if (node->is_list()) {
      size_t n = node->size();
      for (size_t i = 0; i < n; ++i) resolve_tree(join(path, std::to_string(i)));
    }
  }

 private:
  void resolve_string_at(const std::string& path) {
    Config* node = root_.find(path);
    if (!node || node->kind() != Kind::String ||
        node->as_string().find("${") == std::string::npos) {
      return;
    }
    for (size_t i = 0; i < stack_.size(); ++i) {
      if (stack_[i] == path) {
        std::string chain;
        for (size_t j = i; j < stack_.size(); ++j) chain += stack_[j] + " -> ";
        throw UsageError(fmt::format("interpolation cycle: {}{} (each of these keys refers to the "
                                     "next one)",
                                     chain, path));
      }
    }
    stack_.push_back(path);
    Config value = evaluate(node->as_string(), path);
    stack_.pop_back();
    root_.find(path)->operator=(std::move(value));  // re-find: evaluation may edit the tree
  }

  // A whole string: one interpolation keeps its type; otherwise text.
  Config evaluate(std::string_view text, const std::string& at) {
    if (text.size() > 2 && text.substr(0, 2) == "${" && closing_brace(text, 0) == text.size()) {
      return evaluate_inner(text.substr(2, text.size() - 3), at, text);
    }
    std::string out;
    for (size_t i = 0; i < text.size();) {
      if (text[i] == '\\' && text.substr(i + 1, 2) == "${") {
        out += "${";
        i += 3;
      } else if (text.substr(i, 2) == "${") {
        size_t end = closing_brace(text, i);
        if (end == std::string_view::npos) {
          throw UsageError(fmt::format("'{}': unterminated interpolation in '{}' (missing '}}')",
                                       at, text));
        }
        std::string_view expr = text.substr(i, end - i);
        Config part = evaluate_inner(expr.substr(2, expr.size() - 3), at, expr);
        if (!part.is_scalar()) {
          throw UsageError(fmt::format("'{}': {} in '{}' is {} and cannot be part of a string; "
                                       "use it as the whole value instead",
                                       at, expr, text, Config::kind_name(part.kind())));
        }
        out += part.to_text();
        i = end;
      } else {
        out += text[i++];
      }
    }
    return Config(out);
  }

  Config evaluate_inner(std::string_view inner, const std::string& at, std::string_view expr) {
    // A resolver call has a ':' outside nested ${}.
    int depth = 0;
    for (size_t i = 0; i < inner.size(); ++i) {
      if (inner[i] == '$' && i + 1 < inner.size() && inner[i + 1] == '{') {
        ++depth;
        ++i;
      } else if (inner[i] == '}') {
        --depth;
      } else if (inner[i] == ':' && depth == 0) {
        return call(std::string(trim_whitespace(inner.substr(0, i))), split_args(inner.substr(i + 1)), at, expr);
      }
    }
    std::string key(trim_whitespace(inner));
    if (key.find("${") != std::string::npos) key = evaluate(key, at).to_text();  // ${a.${b}}
    return lookup(absolute_key(key, at, expr), at, expr);
  }

  std::string absolute_key(const std::string& key, const std::string& at, std::string_view expr) {
    if (key.empty()) throw UsageError(fmt::format("'{}': empty interpolation {}", at, expr));
    if (key[0] != '.') return key;
    size_t dots = key.find_first_not_of('.');
    if (dots == std::string::npos) {
      throw UsageError(fmt::format("'{}': interpolation {} names no key", at, expr));
    }
    std::vector<std::string> base = split_path(at);
    base.pop_back();  // one dot = the mapping holding `at`
    for (size_t i = 1; i < dots; ++i) {
      if (base.empty()) {
        throw UsageError(fmt::format("'{}': interpolation {} goes above the top of the config", at, expr));
      }
      base.pop_back();
    }
    std::string out;
    for (const auto& s : base) out = join(out, s);
    return join(out, key.substr(dots));
  }

  Config lookup(const std::string& key, const std::string& at, std::string_view expr) {
    // Resolve each prefix first, so `${x.y}` works when x is itself `${...}`.
    std::vector<std::string> segments = split_path(key);
    std::string prefix;
    for (const auto& segment : segments) {
      prefix = join(prefix, segment);
      if (!root_.find(prefix)) {
        throw UsageError(fmt::format("'{}': interpolation {} refers to '{}', which does not exist.{}",
                                     at, expr, key, did_you_mean(closest_keys(root_, key))));
      }
      resolve_string_at(prefix);
    }
    resolve_tree(key);  // a mapping or list target: resolve inside it too
    return *root_.find(key);
  }

  std::vector<std::string> split_args(std::string_view args) {
    std::vector<std::string> out;
    int depth = 0;
    char quote = 0;
    size_t start = 0;
    for (size_t i = 0; i < args.size(); ++i) {
      char c = args[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '$' && i + 1 < args.size() && args[i + 1] == '{') {
        ++depth;
        ++i;
      } else if (c == '}') {
        --depth;
      } else if (c == ',' && depth == 0) {
        out.emplace_back(trim_whitespace(args.substr(start, i - start)));
        start = i + 1;
      }
    }
    out.emplace_back(trim_whitespace(args.substr(start)));
    if (out.size() == 1 && out[0].empty()) out.clear();
    return out;
  }

  // A resolver argument: quoted -> string; a whole ${} keeps its type; other
  // text is typed like an unquoted YAML scalar.
  Config argument(const std::string& arg, const std::string& at) {
    if (arg.size() >= 2 && (arg.front() == '\'' || arg.front() == '"') && arg.back() == arg.front()) {
      return Config(arg.substr(1, arg.size() - 2));
    }
    if (arg.find("${") == std::string::npos) return resolve_plain_scalar(arg);
    Config value = evaluate(arg, at);
    bool whole = arg.substr(0, 2) == "${" && closing_brace(arg, 0) == arg.size();
    return whole ? value : resolve_plain_scalar(value.as_string());
  }

  Config call(const std::string& name, const std::vector<std::string>& raw_args,
              const std::string& at, std::string_view expr) {
    if (name == "oc.env" || name == "env") {
      if (raw_args.empty() || raw_args.size() > 2) {
        throw UsageError(fmt::format("'{}': {} takes a variable name and an optional default: "
                                     "${{oc.env:NAME}} or ${{oc.env:NAME,default}}",
                                     at, expr));
      }
      std::string var = argument(raw_args[0], at).to_text();
      if (const char* value = std::getenv(var.c_str())) return Config(std::string(value));
      if (raw_args.size() == 2) return argument(raw_args[1], at);
      throw UsageError(fmt::format("'{}': environment variable '{}' is not set (used by {}); set it "
                                   "or give a default: ${{oc.env:{},default}}",
                                   at, var, expr, var));
    }
    if (name == "mul" || name == "add") {
      if (raw_args.empty()) throw UsageError(fmt::format("'{}': {} needs arguments", at, expr));
      bool all_int = true;
      int64_t iacc = name == "mul" ? 1 : 0;
      double facc = name == "mul" ? 1.0 : 0.0;
      for (const auto& raw : raw_args) {
        Config v = argument(raw, at);
        if (v.kind() != Kind::Int && v.kind() != Kind::Float) {
          throw UsageError(fmt::format("'{}': {} needs numbers, but '{}' is {}", at, expr, raw,
                                       v.to_flow()));
        }
        double f = v.kind() == Kind::Int ? static_cast<double>(v.as_int()) : v.as_float();
        if (v.kind() != Kind::Int) all_int = false;
        if (name == "mul") {
          facc *= f;
          if (all_int) iacc *= v.as_int();
        } else {
          facc += f;
          if (all_int) iacc += v.as_int();
        }
      }
      return all_int ? Config(iacc) : Config(facc);
    }
    throw UsageError(fmt::format("'{}': unknown resolver '{}' in {} (supported: oc.env, mul, add)",
                                 at, name, expr));
  }

  Config& root_;
  std::vector<std::string> stack_;  // keys being resolved, for cycle reports
};

}  // namespace

bool has_interpolation(std::string_view text) {
  for (size_t i = text.find("${"); i != std::string_view::npos; i = text.find("${", i + 1)) {
    if (i == 0 || text[i - 1] != '\\') return true;
  }
  return false;
}

void resolve_interpolations(Config& config) { Resolver(config).resolve_tree(""); }

}  // namespace tessel::config
