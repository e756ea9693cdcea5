// Conversion between YAML text and Config, through yaml-cpp. yaml-cpp keeps
// every scalar as text; its tag tells a plain scalar ("?") from a quoted or
// block one ("!"), which is exactly what typing needs: `'1'` is a string,
// `1` an int.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/scalar.h"
#include "core/error.h"

namespace tessel::config {

namespace {

Config from_node(const YAML::Node& node, const std::string& source) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return Config::null();
    case YAML::NodeType::Scalar: {
      const std::string& tag = node.Tag();
      if (tag == "!" || tag == "tag:yaml.org,2002:str") return Config(node.Scalar());
      return resolve_plain_scalar(node.Scalar());
    }
    case YAML::NodeType::Sequence: {
      std::vector<Config> items;
      for (const auto& item : node) items.push_back(from_node(item, source));
      return Config::list(std::move(items));
    }
    case YAML::NodeType::Map: {
      Config out = Config::map();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          throw UsageError(fmt::format("{}:{}: mapping keys must be plain names, not lists or mappings",
                                       source, kv.first.Mark().line + 1));
        }
        const std::string& key = kv.first.Scalar();
        // An empty key cannot be named in a dotted path (a.b.c), and the
        // interpolation walk would take "" for the root and recurse forever.
        if (key.empty()) {
          throw UsageError(fmt::format("{}:{}: empty mapping key; keys are names, as in a.b.c",
                                       source, kv.first.Mark().line + 1));
        }
        if (out.child(key)) {
          throw UsageError(fmt::format("{}:{}: duplicate key '{}'", source,
                                       kv.first.Mark().line + 1, key));
        }
        out.entries().emplace_back(key, from_node(kv.second, source));
      }
      return out;
    }
  }
  return Config::null();
}

bool all_scalars(const Config& list) {
  for (const auto& item : list.items()) {
    if (!item.is_scalar()) return false;
  }
  return true;
}

void emit(YAML::Emitter& out, const Config& node) {
  switch (node.kind()) {
    case Kind::Null: out << YAML::Null; break;
    case Kind::Bool: out << (node.as_bool() ? "true" : "false"); break;
    case Kind::Int:
    case Kind::Float: out << node.to_text(); break;
    case Kind::String:
      if (plain_text_is_not_string(node.as_string())) {
        out << YAML::DoubleQuoted << node.as_string();
      } else {
        out << node.as_string();
      }
      break;
    case Kind::List:
      // Short scalar lists read best inline (`betas: [0.9, 0.98]`).
      if (node.items().empty() || all_scalars(node)) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : node.items()) emit(out, item);
      out << YAML::EndSeq;
      break;
    case Kind::Map:
      if (node.entries().empty()) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& [key, value] : node.entries()) {
        out << YAML::Key;
        if (plain_text_is_not_string(key)) {
          out << YAML::DoubleQuoted << key;
        } else {
          out << key;
        }
        out << YAML::Value;
        emit(out, value);
      }
      out << YAML::EndMap;
      break;
  }
}

}  // namespace

Config parse_yaml(std::string_view text, const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    throw UsageError(fmt::format("{}:{}:{}: YAML syntax error: {}", source_name, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  }
  Config out = from_node(root, source_name);
  if (out.is_null()) out = Config::map();  // an empty file is an empty mapping
  out.set_source_path(source_name);
  return out;
}

std::string Config::to_yaml() const {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetNullFormat(YAML::LowerNull);
  emit(out, *this);
  std::string text = out.c_str();
  return text + "\n";
}

}  // namespace tessel::config
