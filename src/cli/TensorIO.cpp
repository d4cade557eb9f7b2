#include "cli/TensorIO.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/Npy.h"
#include "support/Diagnostic.h"

namespace tessera::cli {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The view's declared shape with its dims' values: "[M, 4] = [300, 4]".
std::string view_shape_str(const Value& v, const std::vector<int64_t>& shape) {
  std::string decl = "[";
  for (size_t i = 0; i < v.type.shape.size(); ++i) {
    const Dim& d = v.type.shape[i];
    decl += (i ? ", " : "") + (d.is_static() ? std::to_string(d.value) : d.symbol);
  }
  decl += "]";
  std::string val = shape_str(shape);
  return decl == val ? decl : decl + " = " + val;
}

}  // namespace

ViewFiles read_view_files(const Kernel& k, const Sizes& sizes, const std::vector<std::string>& items,
                          const std::string& option) {
  std::vector<Value*> views = k.view_params();
  ViewFiles out(views.size());
  // Names first, so that a misspelt or repeated name is reported before any file is read.
  std::vector<std::pair<size_t, std::string>> files;
  std::vector<bool> named(views.size());
  for (const std::string& item : items) {
    // The first '=' splits: a path may hold '=' or ',' itself.
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw TesseraError("bad " + option + " '" + item + "': expected NAME=FILE.npy");
    const std::string name = item.substr(0, eq);
    size_t i = 0;
    while (i < views.size() && views[i]->name != name) ++i;
    if (i == views.size()) {
      std::string list;
      for (const Value* v : views) list += (list.empty() ? "" : ", ") + v->name;
      throw TesseraError(option + " " + item + ": kernel '" + k.name + "' has no view '" + name +
                         "' (its views: " + list + ")");
    }
    if (named[i]) throw TesseraError(option + " names view '" + name + "' twice");
    named[i] = true;
    files.emplace_back(i, item);
  }
  for (const auto& [i, item] : files) {
    const Value& v = *views[i];
    const std::string& name = v.name;
    const std::string path = item.substr(name.size() + 1);
    const std::string what = option + " " + item + ": ";
    NpyArray a;
    try {
      a = read_npy(path);
    } catch (const TesseraError& e) {
      throw TesseraError(e.loc(), e.message() + " (" + option + " " + name + ")");
    }
    if (!npy_descr_fits(a.descr, v.type.elem)) {
      std::string hint = npy_descr(v.type.elem) + "'";
      if (v.type.elem == ScalarKind::BF16 || v.type.elem == ScalarKind::F8E4M3 || v.type.elem == ScalarKind::F8E5M2)
        hint += ", its raw bits: NumPy has no " + std::string(scalar_name(v.type.elem));
      throw TesseraError(what + "the file holds dtype '" + a.descr + "', view '" + name + "' of kernel '" + k.name +
                         "' is " + std::string(scalar_name(v.type.elem)) + " (read as '" + hint + ")");
    }
    std::vector<int64_t> want = view_shape(k, v, sizes);
    if (a.shape != want)
      throw TesseraError(what + "the file holds shape " + shape_str(a.shape) + ", view '" + name + "' of kernel '" +
                         k.name + "' is " + view_shape_str(v, want) + " at these sizes");
    out[i] = npy_to_tensor(std::move(a), v.type.elem, path);
  }
  return out;
}

void write_view_files(const Kernel& k, const std::vector<Tensor>& tensors, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw TesseraError("--output " + dir + ": cannot create the directory: " + ec.message());
  if (!std::filesystem::is_directory(dir)) throw TesseraError("--output " + dir + ": not a directory");
  std::vector<Value*> views = k.view_params();
  for (size_t i = 0; i < views.size() && i < tensors.size(); ++i)
    write_npy((std::filesystem::path(dir) / (views[i]->name + ".npy")).string(), tensors[i]);
}

}  // namespace tessera::cli
