#include "ir/Struct.h"

#include <algorithm>

namespace tessera {

std::string struct_value_desc(const Value* v) {
  if (!v) return "?";
  return v->name.empty() ? v->type.str() : "%" + v->name;
}

Shape struct_slot_shape(const Type& storage, int tile_rank) {
  if (storage.is_pipe()) return Shape(storage.shape.begin() + (storage.shape.empty() ? 0 : 1), storage.shape.end());
  int skip = std::max(0, storage.rank() - tile_rank);
  return Shape(storage.shape.begin() + skip, storage.shape.end());
}

Shape struct_slot_dims(const Type& buffer, int tile_rank) {
  int n = std::max(0, buffer.rank() - tile_rank);
  return Shape(buffer.shape.begin(), buffer.shape.begin() + n);
}

std::string struct_fault_message(const Op& op, StructFault f) {
  const Value* storage = op.operands.empty() ? (op.results.empty() ? nullptr : op.results[0]) : op.operands[0];
  std::string name = "'" + std::string(op.name()) + "'";
  std::string s = struct_value_desc(storage);
  switch (f) {
    case StructFault::PipeFull: {
      std::string stages = storage && !storage->type.shape.empty() ? storage->type.shape[0].str() : "?";
      return name + " onto pipe " + s + ", which already holds " + stages + (stages == "1" ? " tile" : " tiles") +
             " (its number of stages): in program order every push needs a free stage (pop "
             "first, or give the pipe more stages)";
    }
    case StructFault::PipeEmpty:
      return name + " from pipe " + s + ", which is empty: in program order every pop needs an earlier push";
    case StructFault::PipeNotEmpty:
      return name + " " + s + " still holds tiles at the end of the program: every pushed tile must be popped";
    case StructFault::SlotRange: {
      int tile_rank = 0;
      if (op.kind == OpKind::BufferRead && !op.results.empty()) tile_rank = op.results[0]->type.rank();
      else if (op.operands.size() > 1) tile_rank = op.operands[1]->type.rank();
      std::string dims = storage ? shape_str(struct_slot_dims(storage->type, tile_rank)) : "?";
      return name + " slot index is out of range for buffer " + s + " (its slots are " + dims + ")";
    }
    case StructFault::ForStep:
      return "'for' step is not positive: a step of 0 or below is an error";
    case StructFault::WhileLimit: return while_limit_message(kMaxWhileIterations);
    case StructFault::GridDivZero: return std::string(op.name()) + " by zero";
    case StructFault::TileAlloc: return "the cpu backend found no memory for a tile of " + name + " (kept on the heap)";
    default: break;  // the grid's faults name the kernel: struct_fault_error
  }
  return name + " failed";
}

std::string while_limit_message(int64_t limit) {
  return "while loop did not end after " + std::to_string(limit) + " iterations (the limit on every backend)";
}

std::string grid_negative_message(const Kernel& k, int axis) {
  return "grid size on axis " + std::to_string(axis) + " of kernel '" + k.name +
         "' is negative (a size of 0 runs no programs; a negative size is an error)";
}

std::string grid_too_large_message(const Kernel& k) {
  return "the grid of kernel '" + k.name + "' has more than 2^63 - 1 programs";
}

namespace {

std::vector<const Op*> ops_in_order(const Kernel& k) {
  std::vector<const Op*> out;
  walk(const_cast<Kernel&>(k), [&](Op& op) { out.push_back(&op); });
  return out;
}

}  // namespace

int64_t struct_fault_code(const Kernel& k, const Op& op, StructFault f) {
  auto ops = ops_in_order(k);
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i] == &op) return (static_cast<int64_t>(i) << 4) | static_cast<int64_t>(f);
  throw TesseraError(op.loc, "internal: op '" + std::string(op.name()) + "' is not in kernel '" + k.name + "'");
}

TesseraError struct_fault_error(const Kernel& k, int64_t code) {
  auto ops = ops_in_order(k);
  int64_t f = code & 15, i = code >> 4;
  if (code <= 0 || f < 1 || f > static_cast<int64_t>(StructFault::TileAlloc) || i >= static_cast<int64_t>(ops.size()))
    return TesseraError(k.loc, "kernel '" + k.name + "' failed with an unknown run-time error code " + std::to_string(code));
  const Op& op = *ops[static_cast<size_t>(i)];
  if (f >= static_cast<int64_t>(StructFault::GridNegative) && f < static_cast<int64_t>(StructFault::GridTooLarge))
    return TesseraError(op.loc, grid_negative_message(k, static_cast<int>(f - static_cast<int64_t>(StructFault::GridNegative))));
  if (f == static_cast<int64_t>(StructFault::GridTooLarge)) return TesseraError(op.loc, grid_too_large_message(k));
  return TesseraError(op.loc, struct_fault_message(op, static_cast<StructFault>(f)));
}

}  // namespace tessera
