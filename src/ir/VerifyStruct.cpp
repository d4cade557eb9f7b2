// The kernel-wide rules of the Struct layer (docs/semantics.md, "Struct"), run by verify() on a
// kernel whose ops already passed their own checks:
//
//  - `alloc` and `pipe` stand at the top level of the kernel body (their storage lives for the
//    whole program, like a CTA's shared memory);
//  - `warp_role` regions do not nest; a producer region never pops, a consumer region never
//    pushes; a pipe used inside warp roles is used only inside them, and a buffer used inside
//    a role's regions only inside that role's regions (roles hand tiles on through pipes);
//  - every pipe is pushed as often as it is popped, where the counts are known statically
//    (straight-line code and `for` loops; a push or pop under `if` / `while` leaves the count
//    to the run-time check at the end of the program).
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <unordered_map>

#include "ir/Struct.h"

namespace tessera {

namespace {

enum class Role { None, Producer, Consumer };

const char* role_name(Role r) { return r == Role::Producer ? "producer" : r == Role::Consumer ? "consumer" : "no"; }

std::string at(const Loc& l) {
  if (!l.known()) return "";
  return " (at " + std::to_string(l.line) + ":" + std::to_string(l.col) + ")";
}

std::string q(std::string_view s) { return "'" + std::string(s) + "'"; }

struct Use {
  const Op* op;
  Role role;
};

class StructRules {
 public:
  explicit StructRules(const Kernel& k) : k_(k) {}

  std::vector<TesseraError> run() {
    visit(*k_.body, Role::None, nullptr);
    check_sharing();
    for (const Op* p : pipes_) check_balance(*p);
    return std::move(errors_);
  }

 private:
  const Kernel& k_;
  std::vector<TesseraError> errors_;
  std::vector<const Op*> pipes_;
  // Every use of each buffer / pipe, in program order.
  std::unordered_map<const Value*, std::vector<Use>> uses_;
  std::vector<const Value*> storage_order_;

  void error(const Op& op, const std::string& msg) { errors_.emplace_back(op.loc, q(op.name()) + " " + msg); }

  void visit(const Block& b, Role role, const Op* role_op) {
    for (const auto& o : b.ops) {
      const Op& op = *o;
      switch (op.kind) {
        case OpKind::Alloc:
        case OpKind::Pipe:
          if (&b != k_.body.get())
            error(op, "must be at the top level of the kernel body: its storage lives for the whole program");
          if (op.kind == OpKind::Pipe) pipes_.push_back(&op);
          break;
        case OpKind::PipePush:
        case OpKind::PipePop:
        case OpKind::AsyncCopy:
        case OpKind::BufferRead:
        case OpKind::BufferWrite: {
          const Value* s = op.operand(0);
          if (!uses_.count(s)) storage_order_.push_back(s);
          uses_[s].push_back({&op, role});
          if (op.kind == OpKind::PipePop && role == Role::Producer)
            error(op, "in a producer region" + at(role_op->loc) + ": only consumer regions pop pipes");
          if (op.kind == OpKind::PipePush && role == Role::Consumer)
            error(op, "in a consumer region" + at(role_op->loc) + ": only producer regions push pipes");
          break;
        }
        case OpKind::WarpRole:
          if (role_op) {
            error(op, "cannot be nested in another 'warp_role'" + at(role_op->loc));
            break;
          }
          visit(op.region(0), op.attr_string("role") == "producer" ? Role::Producer : Role::Consumer, &op);
          continue;
        default: break;
      }
      for (const auto& r : op.regions) visit(*r, role, role_op);
    }
  }

  // A pipe used inside warp roles is used only there; a buffer belongs to one role (or none).
  void check_sharing() {
    for (const Value* s : storage_order_) {
      const auto& us = uses_[s];
      const Use* in_role = nullptr;
      for (const Use& u : us)
        if (u.role != Role::None) {
          in_role = &u;
          break;
        }
      if (!in_role) continue;
      bool pipe = s->type.is_pipe();
      std::string what = pipe ? "pipe " : "buffer ";
      for (const Use& u : us) {
        if (u.role == Role::None) {
          error(*u.op, "of " + what + struct_value_desc(s) + " outside a warp_role region: " + struct_value_desc(s) +
                           " is also used in a " + role_name(in_role->role) + " region" + at(in_role->op->loc) +
                           (pipe ? ", so its pushes belong in producer regions and its pops in consumer regions"
                                 : "; a buffer belongs to one role (hand tiles to another role through a pipe)"));
          break;
        }
        if (!pipe && u.role != in_role->role) {
          error(*u.op, "of buffer " + struct_value_desc(s) + " in a " + role_name(u.role) + " region: it is also used in a " +
                           role_name(in_role->role) + " region" + at(in_role->op->loc) +
                           "; a buffer belongs to one role (hand tiles to another role through a pipe)");
          break;
        }
      }
    }
  }

  // --- push / pop balance ---

  using LoopKey = std::array<const Value*, 3>;  // lb, ub, step of a loop with unknown trips
  struct Count {
    int64_t pushes = 0, pops = 0;
    std::string where;  // "per iteration of the loop at 9:3"
  };

  static std::optional<int64_t> const_int(const Value* v) {
    if (!v->def || v->def->kind != OpKind::Const) return std::nullopt;
    const Attr* a = v->def->find_attr("value");
    if (!a || !std::holds_alternative<int64_t>(*a)) return std::nullopt;
    return std::get<int64_t>(*a);
  }

  static std::optional<int64_t> const_trips(const Op& f) {
    auto lb = const_int(f.operand(0)), ub = const_int(f.operand(1)), st = const_int(f.operand(2));
    if (!lb || !ub || !st || *st <= 0) return std::nullopt;
    if (*ub <= *lb) return 0;
    return (*ub - *lb + *st - 1) / *st;
  }

  static bool touches(const Block& b, const Value* p) {
    for (const auto& op : b.ops) {
      if ((op->kind == OpKind::PipePush || op->kind == OpKind::PipePop) && op->operand(0) == p) return true;
      for (const auto& r : op->regions)
        if (touches(*r, p)) return true;
    }
    return false;
  }

  struct Walk {
    const Value* pipe;
    std::map<std::vector<LoopKey>, Count> counts;
    bool unknown = false;
  };

  static void count(const Block& b, int64_t coef, std::vector<LoopKey> loops, const std::string& where, Walk& w) {
    for (const auto& o : b.ops) {
      if (w.unknown) return;
      const Op& op = *o;
      if ((op.kind == OpKind::PipePush || op.kind == OpKind::PipePop) && op.operand(0) == w.pipe) {
        std::vector<LoopKey> key = loops;
        std::sort(key.begin(), key.end());
        Count& c = w.counts[key];
        (op.kind == OpKind::PipePush ? c.pushes : c.pops) += coef;
        if (c.where.empty()) c.where = where;
        continue;
      }
      if (std::none_of(op.regions.begin(), op.regions.end(), [&](const auto& r) { return touches(*r, w.pipe); }))
        continue;
      if (op.kind == OpKind::WarpRole) {
        count(op.region(0), coef, loops, where, w);
      } else if (op.kind == OpKind::For) {
        if (auto trips = const_trips(op)) {
          if (*trips > (int64_t{1} << 40) / std::max<int64_t>(coef, 1)) {
            w.unknown = true;
            return;
          }
          count(op.region(0), coef * *trips, loops, where, w);
        } else {
          std::vector<LoopKey> inner = loops;
          inner.push_back({op.operand(0), op.operand(1), op.operand(2)});
          std::string lc = std::to_string(op.loc.line) + ":" + std::to_string(op.loc.col);
          std::string wh = where.empty() ? "per iteration of the loop at " + lc : where + " and of the loop at " + lc;
          count(op.region(0), coef, std::move(inner), wh, w);
        }
      } else {
        w.unknown = true;  // if / while / combiners: the count depends on run-time values
        return;
      }
    }
  }

  static std::string times(int64_t n, const char* verb) {
    return std::string(verb) + " " + std::to_string(n) + (n == 1 ? " time" : " times");
  }

  void check_balance(const Op& pipe_op) {
    Walk w{pipe_op.result(), {}, false};
    count(*k_.body, 1, {}, "", w);
    if (w.unknown) return;
    for (const auto& [key, c] : w.counts) {
      if (c.pushes == c.pops) continue;
      std::string where = c.where.empty() ? "in all" : c.where;
      errors_.emplace_back(pipe_op.loc, "'pipe' " + struct_value_desc(pipe_op.result()) + " is " +
                                            times(c.pushes, "pushed") + " and " + times(c.pops, "popped") + " " +
                                            where + ": every pushed tile must be popped");
      return;
    }
  }
};

}  // namespace

std::vector<TesseraError> verify_struct_rules(const Kernel& k) {
  if (!k.body) return {};
  return StructRules(k).run();
}

}  // namespace tessera
