// docs/ARCHITECTURE.md held to the tree it describes. The map is only useful
// while it is true, so every change that adds a file, a folder, a layer, a
// dependency between layers or a [Note: ...] has to update it, and this test
// says where:
//   - every folder under src/ has a section (### `src/<folder>/`), and every
//     file a row in that section's table (`name.{h,cpp}` stands for both);
//     a row for a file that is gone fails too;
//   - the layer table (## Layers) lists each tessel_layer(...) of the
//     top-level CMakeLists.txt with exactly its DEPS;
//   - each file under src/<layer>/ includes only "<other>/..." headers of
//     layers its layer may use: its DEPS and, through them, theirs
//     (transitively, read from CMakeLists.txt, not repeated here);
//   - every [Note: title] in src/ is listed with the file that holds it, and
//     every `src/...` path the page names exists.
// It reads the source tree only, so it runs in a second and fails with the
// file to fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/source_tree.h"

namespace {

namespace fs = std::filesystem;

const char* const kDoc = "docs/ARCHITECTURE.md";

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// The `...` spans of a piece of Markdown.
std::vector<std::string> code_spans(const std::string& text) {
  static const std::regex span("`([^`]+)`");
  std::vector<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), span), end; it != end; ++it)
    out.push_back((*it)[1]);
  return out;
}

// "a.{h,cpp}" -> a.h, a.cpp (one brace group at most).
std::vector<std::string> expand_braces(const std::string& name) {
  const auto open = name.find('{');
  const auto close = name.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return {name};
  std::vector<std::string> out;
  std::istringstream alternatives(name.substr(open + 1, close - open - 1));
  for (std::string alt; std::getline(alternatives, alt, ',');)
    out.push_back(name.substr(0, open) + trim(alt) + name.substr(close + 1));
  return out;
}

// Cells of a Markdown table row; empty for a separator row or a non-row.
std::vector<std::string> table_cells(const std::string& line) {
  const std::string row = trim(line);
  if (row.size() < 2 || row.front() != '|') return {};
  if (row.find_first_not_of("|-: ") == std::string::npos) return {};
  std::vector<std::string> cells;
  std::istringstream in(row.substr(1));
  for (std::string cell; std::getline(in, cell, '|');) cells.push_back(trim(cell));
  return cells;
}

struct ArchitectureDoc {
  std::string text;
  // "core", "parallel/optimized_plans" -> the file names its table lists.
  std::map<std::string, std::set<std::string>> folders;
  // layer -> the layers its row says it uses directly.
  std::map<std::string, std::set<std::string>> layers;
};

ArchitectureDoc read_doc(const fs::path& root) {
  ArchitectureDoc doc;
  doc.text = read_text(root / kDoc);
  static const std::regex heading(R"(^(#+)\s+(.*)$)");
  static const std::regex folder_heading(R"(`src/([a-z0-9_/]+)/`)");
  std::string folder;  // the section being read: a folder, "" elsewhere
  bool in_layers = false;
  for (const std::string& line : lines_of(doc.text)) {
    std::smatch m;
    if (std::regex_match(line, m, heading)) {
      const std::string title = m[2];
      std::smatch f;
      folder = m[1].length() == 3 && std::regex_search(title, f, folder_heading) ? f[1].str() : "";
      if (!folder.empty()) doc.folders[folder];
      in_layers = m[1].length() == 2 && title == "Layers";
      continue;
    }
    const auto cells = table_cells(line);
    if (cells.size() < 2) continue;
    if (!folder.empty()) {
      for (const auto& span : code_spans(cells[0]))
        for (const auto& name : expand_braces(span)) doc.folders[folder].insert(name);
    } else if (in_layers) {
      const auto layer = code_spans(cells[0]);
      if (layer.size() != 1) continue;  // the header row
      const auto uses = code_spans(cells[1]);
      doc.layers[layer[0]] = std::set<std::string>(uses.begin(), uses.end());
    }
  }
  return doc;
}

// tessel_layer(NAME DEPS a b LIBS ...) calls of the top-level CMakeLists.txt.
std::map<std::string, std::set<std::string>> cmake_layers(const fs::path& root) {
  const std::string text = read_text(root / "CMakeLists.txt");
  std::map<std::string, std::set<std::string>> layers;
  const std::string call = "tessel_layer(";
  for (size_t at = text.find(call); at != std::string::npos; at = text.find(call, at + 1)) {
    const size_t line_start = text.rfind('\n', at) + 1;                     // npos + 1 == 0
    if (!trim(text.substr(line_start, at - line_start)).empty()) continue;  // not a call
    const size_t close = text.find(')', at);
    std::istringstream args(text.substr(at + call.size(), close - at - call.size()));
    std::string name, word;
    args >> name;
    bool deps = false;
    auto& uses = layers[name];
    while (args >> word) {
      if (word == "DEPS" || word == "LIBS") {
        deps = word == "DEPS";
      } else if (deps) {
        uses.insert(word);
      }
    }
  }
  return layers;
}

std::set<std::string> usable_layers(const std::map<std::string, std::set<std::string>>& layers,
                                    const std::string& layer) {
  std::set<std::string> seen{layer};
  std::vector<std::string> todo{layer};
  while (!todo.empty()) {
    const std::string l = todo.back();
    todo.pop_back();
    const auto it = layers.find(l);
    if (it == layers.end()) continue;
    for (const auto& d : it->second)
      if (seen.insert(d).second) todo.push_back(d);
  }
  return seen;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " ") + n;
  return out.empty() ? "(none)" : out;
}

// Files under src/ as paths relative to src/, in order.
std::vector<fs::path> source_files(const fs::path& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root / "src")) {
    if (e.is_regular_file() && e.path().filename().string().front() != '.')
      out.push_back(fs::relative(e.path(), root / "src"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> source_folders(const fs::path& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root / "src"))
    if (e.is_directory()) out.push_back(fs::relative(e.path(), root / "src"));
  std::sort(out.begin(), out.end());
  return out;
}

class ArchitectureDocTest : public ::testing::Test {
 protected:
  const fs::path root = tessel::test_support::source_tree();
  const ArchitectureDoc doc = read_doc(root);
};

TEST_F(ArchitectureDocTest, EverySourceFolderHasASection) {
  for (const auto& folder : source_folders(root)) {
    if (!doc.folders.count(folder.generic_string())) {
      ADD_FAILURE() << "src/" << folder.generic_string() << "/ has no section in " << kDoc
                    << ": add a heading ### `src/" << folder.generic_string()
                    << "/` with a paragraph (what lives there, where a newcomer starts "
                       "reading) and a table of its files";
    }
  }
}

TEST_F(ArchitectureDocTest, EverySourceFileIsNamed) {
  for (const auto& file : source_files(root)) {
    const std::string folder = file.parent_path().generic_string();
    const auto it = doc.folders.find(folder);
    if (it == doc.folders.end() || !it->second.count(file.filename().string())) {
      ADD_FAILURE() << "src/" << file.generic_string() << " is not named in " << kDoc
                    << ": add a row `" << file.filename().string()
                    << "` | what it holds | to the table under ### `src/" << folder << "/`";
    }
  }
}

TEST_F(ArchitectureDocTest, NamesOnlyFilesThatExist) {
  for (const auto& [folder, names] : doc.folders) {
    for (const auto& name : names) {
      if (!fs::is_regular_file(root / "src" / folder / name)) {
        ADD_FAILURE() << kDoc << " names src/" << folder << "/" << name << " under ### `src/"
                      << folder << "/`, but there is no such file: remove or rename its row";
      }
    }
  }
  // Paths named anywhere on the page: a folder may be one whose section
  // already exists although its files do not yet (a layer being added).
  static const std::regex path(R"(^src/[A-Za-z0-9_./]*$)");
  for (const auto& span : code_spans(doc.text)) {
    if (!std::regex_match(span, path)) continue;
    const bool folder = span.back() == '/';
    const std::string name = span.substr(4, span.size() - 4 - (folder ? 1 : 0));
    if (!fs::exists(root / span) && !(folder && doc.folders.count(name))) {
      ADD_FAILURE() << kDoc << " names `" << span << "`, which does not exist";
    }
  }
}

TEST_F(ArchitectureDocTest, LayerTableMatchesCMake) {
  const auto layers = cmake_layers(root);
  ASSERT_FALSE(layers.empty()) << "no tessel_layer(...) found in CMakeLists.txt";
  for (const auto& [layer, deps] : layers) {
    const auto row = doc.layers.find(layer);
    if (row == doc.layers.end()) {
      ADD_FAILURE() << "layer " << layer << " (CMakeLists.txt) has no row in the layer table of "
                    << kDoc << ": add | `" << layer << "` | " << join(deps) << " | ... |";
    } else if (row->second != deps) {
      ADD_FAILURE() << "layer " << layer << ": " << kDoc << " says it uses " << join(row->second)
                    << ", CMakeLists.txt says DEPS " << join(deps) << ": make them agree";
    }
  }
  for (const auto& [layer, uses] : doc.layers) {
    if (!layers.count(layer))
      ADD_FAILURE() << kDoc << " lists a layer " << layer
                    << " that CMakeLists.txt does not declare";
  }
}

TEST_F(ArchitectureDocTest, EachLayerIncludesOnlyLayersItMayUse) {
  const auto layers = cmake_layers(root);
  static const std::regex include(R"(^\s*#\s*include\s*"([^"/]+)/[^"]*")");
  for (const auto& file : source_files(root)) {
    const std::string layer = file.begin()->string();
    if (!layers.count(layer)) {
      ADD_FAILURE() << "src/" << file.generic_string() << " is in src/" << layer
                    << "/, which CMakeLists.txt does not declare as a layer (tessel_layer(" << layer
                    << " DEPS ...)): nothing builds it";
      continue;
    }
    const auto usable = usable_layers(layers, layer);
    std::set<std::string> others = usable;
    others.erase(layer);
    const auto lines = lines_of(read_text(root / "src" / file));
    for (size_t i = 0; i < lines.size(); ++i) {
      std::smatch m;
      if (!std::regex_search(lines[i], m, include)) continue;
      const std::string target = m[1];
      if (!layers.count(target) || usable.count(target)) continue;
      ADD_FAILURE() << "src/" << file.generic_string() << ":" << i + 1 << " includes "
                    << trim(lines[i]).substr(trim(lines[i]).find('"')) << ", but layer " << layer
                    << " may include only its own headers and those of " << join(others)
                    << " (tessel_layer(" << layer << " DEPS " << join(layers.at(layer))
                    << ") in CMakeLists.txt, and what those use): the include runs back up the "
                       "layers; move the code down or pass what it needs in";
    }
  }
}

TEST_F(ArchitectureDocTest, EveryNoteIsListedWithItsFile) {
  static const std::regex note(R"(\[Note: ([^\]]+)\])");
  std::map<std::string, std::set<std::string>> in_sources;  // title -> files mentioning it
  for (const auto& file : source_files(root)) {
    const std::string text = read_text(root / "src" / file);
    for (std::sregex_iterator it(text.begin(), text.end(), note), end; it != end; ++it)
      in_sources[(*it)[1]].insert("src/" + file.generic_string());
  }
  std::map<std::string, std::string> listed;  // title -> the file the page says holds it
  for (const std::string& line : lines_of(doc.text)) {
    std::smatch m;
    if (table_cells(line).size() < 2 || !std::regex_search(line, m, note)) continue;
    for (const auto& span : code_spans(line)) {
      if (span.rfind("src/", 0) == 0) {
        listed[m[1]] = span;
        break;
      }
    }
  }
  for (const auto& [title, files] : in_sources) {
    if (!listed.count(title)) {
      ADD_FAILURE() << "[Note: " << title << "] (in " << join(files) << ") is not listed in "
                    << kDoc << ": add a row to \"Cross-cutting designs and their notes\" naming "
                    << "the file at whose top it is written";
    }
  }
  for (const auto& [title, file] : listed) {
    const auto it = in_sources.find(title);
    if (it == in_sources.end() || !it->second.count(file)) {
      ADD_FAILURE() << kDoc << " lists [Note: " << title << "] in " << file
                    << ", but that file does not contain it";
    }
  }
}

}  // namespace
