// Printer of the canonical text form (docs/ir.md): two-space indentation, one op per line,
// attributes in the op table's order, names kept where they are unique in the kernel.
#include <unordered_map>
#include <unordered_set>

#include "text/Lexer.h"
#include "text/Syntax.h"
#include "text/Text.h"

namespace tessera {

namespace {

class KernelPrinter {
 public:
  explicit KernelPrinter(const Kernel& k) : k_(k) { choose_kept_names(); }

  std::string print() {
    out_ += "kernel @" + k_.name + "(";
    for (size_t i = 0; i < k_.params.size(); ++i) {
      if (i) out_ += ", ";
      out_ += name(k_.params[i]) + ": " + print_type(k_.params[i]->type);
    }
    out_ += ") {\n";
    for (const auto& c : k_.constexprs) {
      out_ += "  constexpr " + c.name + " = " + std::to_string(c.value);
      if (!c.candidates.empty()) out_ += " in " + attr_str(c.candidates);
      out_ += "\n";
    }
    out_ += "  grid ";
    region(*k_.grid, 2);
    out_ += "\n";
    for (const auto& op : k_.body->ops) this->op(*op, 1);
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  // Every value of the kernel in definition order: parameters, then grid and body.
  void collect(const Block& b, std::vector<const Value*>& vs) const {
    for (const Value* a : b.args) vs.push_back(a);
    for (const auto& op : b.ops) {
      for (const auto& r : op->regions) collect(*r, vs);
      for (const Value* r : op->results) vs.push_back(r);
    }
  }

  void choose_kept_names() {
    std::vector<const Value*> vs(k_.params.begin(), k_.params.end());
    collect(*k_.grid, vs);
    collect(*k_.body, vs);
    std::unordered_map<std::string, int> uses;
    for (const Value* v : vs) ++uses[v->name];
    for (const Value* v : vs)
      if (uses[v->name] == 1 && text::is_plain_name(v->name)) {
        names_[v] = "%" + v->name;
        kept_.insert(v->name);
      }
  }

  // A value's printed name; values without a usable hint are numbered on first sight,
  // skipping numbers that are kept hints.
  const std::string& name(const Value* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    std::string n;
    do n = std::to_string(next_++);
    while (kept_.count(n));
    return names_[v] = "%" + n;
  }

  void indent(int depth) { out_.append(static_cast<size_t>(depth) * 2, ' '); }

  // Writes `{ ... }` with the closing brace at `depth - 1`; leaves the line open after '}'.
  void region(const Block& b, int depth) {
    out_ += "{\n";
    if (!b.args.empty()) {
      indent(depth);
      out_ += "^(";
      for (size_t i = 0; i < b.args.size(); ++i) {
        if (i) out_ += ", ";
        out_ += name(b.args[i]) + ": " + print_type(b.args[i]->type);
      }
      out_ += "):\n";
    }
    for (const auto& op : b.ops) this->op(*op, depth);
    indent(depth - 1);
    out_ += "}";
  }

  void attributes(const Op& op) {
    const OpInfo& info = op.info();
    std::vector<const NamedAttr*> order;
    for (const auto& spec : info.attrs)
      for (const auto& a : op.attrs)
        if (a.name == spec.name) order.push_back(&a);
    // Attributes the table does not know (a pass's mistake) still show up in dumps.
    for (const auto& a : op.attrs)
      if (!info.find_attr(a.name)) order.push_back(&a);
    if (order.empty()) return;
    out_ += " {";
    for (size_t i = 0; i < order.size(); ++i) {
      if (i) out_ += ", ";
      out_ += order[i]->name + " = ";
      if (const auto* s = std::get_if<std::string>(&order[i]->value)) out_ += text::escape_string(*s);
      else out_ += attr_str(order[i]->value);
    }
    out_ += "}";
  }

  void op(const Op& op, int depth) {
    indent(depth);
    size_t start = out_.size();
    for (size_t i = 0; i < op.results.size(); ++i) {
      if (i) out_ += ", ";
      out_ += name(op.results[i]);
    }
    if (!op.results.empty()) out_ += " = ";
    out_ += op.name();
    for (size_t i = 0; i < op.operands.size(); ++i) {
      out_ += i ? ", " : " ";
      out_ += name(op.operands[i]);
    }
    attributes(op);
    for (size_t i = 0; i < op.results.size(); ++i) {
      out_ += i ? ", " : " : ";
      out_ += print_type(op.results[i]->type);
    }
    if (op_lines_) (*op_lines_)[&op] = out_.substr(start) + (op.regions.empty() ? "" : " {...}");
    for (size_t i = 0; i < op.regions.size(); ++i) {
      std::string_view kw = text::region_keyword(op.kind, i);
      out_ += " ";
      if (!kw.empty()) out_ += std::string(kw) + " ";
      region(*op.regions[i], depth + 1);
    }
    out_ += "\n";
  }

 public:
  // When set, print() also records each op's own line (regions shown as `{...}`).
  std::unordered_map<const Op*, std::string>* op_lines_ = nullptr;

 private:
  const Kernel& k_;
  std::string out_;
  std::unordered_map<const Value*, std::string> names_;
  std::unordered_set<std::string> kept_;
  int next_ = 0;
};

}  // namespace

std::string print_type(const Type& t) {
  if (!t.has_static_dims()) return t.str();
  const char* kw = t.is_tile() ? "tile" : t.is_buffer() ? "buffer" : "pipe";
  std::string out = kw + ("<" + std::string(scalar_name(t.elem))) + ", " + shape_str(t.shape);
  if (!t.layout.empty()) out += ", layout = " + t.layout.str();
  if (!t.space.empty()) out += ", space = " + text::escape_string(t.space);
  return out + ">";
}

std::string print_kernel(const Kernel& k) { return KernelPrinter(k).print(); }

std::unordered_map<const Op*, std::string> print_op_lines(const Kernel& k) {
  std::unordered_map<const Op*, std::string> lines;
  KernelPrinter p(k);
  p.op_lines_ = &lines;
  p.print();
  return lines;
}

std::string print_module(const Module& m) {
  std::string out;
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    if (i) out += "\n";
    out += print_kernel(*m.kernels[i]);
  }
  return out;
}

}  // namespace tessera
