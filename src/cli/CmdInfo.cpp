// `tessera list`, `tessera ops`, `tessera check`: commands that only read.
#include <algorithm>
#include <iostream>

#include "cli/Args.h"
#include "cli/Commands.h"
#include "ir/Ops.h"
#include "kernels/Library.h"

namespace tessera::cli {

int cmd_list(bool verbose) {
  for (const auto& lk : library()) {
    if (!verbose) {
      std::cout << lk.name << "\n";
      continue;
    }
    std::string dts, sizes;
    for (ScalarKind d : lk.dtypes) dts += (dts.empty() ? "" : ",") + std::string(scalar_name(d));
    for (const auto& [n, v] : lk.default_sizes)
      sizes += (sizes.empty() ? "" : ",") + n + "=" + std::to_string(v);
    std::cout << lk.name << "  [" << dts << "]  " << sizes << "  " << lk.summary << "\n";
  }
  return 0;
}

namespace {

std::string arity(int lo, int hi) {
  if (hi < 0) return std::to_string(lo) + "+";
  if (lo == hi) return std::to_string(lo);
  return std::to_string(lo) + ".." + std::to_string(hi);
}

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "int";
    case AttrKind::Number: return "number";
    case AttrKind::String: return "string";
    case AttrKind::IntList: return "[int]";
    case AttrKind::Bool: return "bool";
  }
  return "?";
}

}  // namespace

int cmd_ops() {
  struct Row {
    std::string name, operands, results, attrs, doc;
  };
  std::vector<Row> rows{{"op", "operands", "results", "attributes", "doc"}};
  for (const OpInfo& info : all_ops()) {
    Row r{std::string(info.name), arity(info.min_operands, info.max_operands),
          info.num_results < 0 ? "any" : std::to_string(info.num_results), "", std::string(info.doc)};
    for (const AttrSpec& a : info.attrs)
      r.attrs += (r.attrs.empty() ? "" : " ") + std::string(a.name) + ":" +
                 std::string(attr_kind_name(a.kind)) + (a.required ? "" : "?");
    if (info.num_regions > 0)
      r.results += " +" + std::to_string(info.num_regions) + (info.num_regions > 1 ? " regions" : " region");
    if (r.attrs.empty()) r.attrs = "-";
    rows.push_back(std::move(r));
  }
  size_t w[4] = {0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.operands.size());
    w[2] = std::max(w[2], r.results.size());
    w[3] = std::max(w[3], r.attrs.size());
  }
  auto pad = [](const std::string& s, size_t n) { return s + std::string(n - s.size() + 2, ' '); };
  for (const Row& r : rows)
    std::cout << pad(r.name, w[0]) << pad(r.operands, w[1]) << pad(r.results, w[2])
              << pad(r.attrs, w[3]) << r.doc << "\n";
  std::cout << "(attribute kinds: int, number = int or float, string, [int], bool; ? = optional)\n";
  return 0;
}

int cmd_check(const std::vector<std::string>& files) {
  bool ok = true;
  for (const auto& f : files) ok &= load_checked_module(f) != nullptr;
  if (ok) std::cout << "ok\n";
  return ok ? 0 : 1;
}

}  // namespace tessera::cli
