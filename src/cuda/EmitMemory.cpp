// Memory ops: load_tile/store_tile (16-byte vector accesses where the whole vector is in bounds
// and aligned, masked scalar accesses at ragged edges), gather/scatter and atomics per element.
// Addresses are computed in 64 bits.
#include <set>

#include "cuda/EmitterInternal.h"

namespace tessera::cudagen {

namespace {

std::string in_bounds(const std::vector<std::string>& g, const std::vector<std::string>& dims) {
  std::string ok;
  for (size_t d = 0; d < g.size(); ++d) ok += (d ? " && " : "") + g[d] + " >= 0 && " + g[d] + " < " + dims[d];
  return ok.empty() ? "true" : ok;
}

std::string offset(const std::vector<std::string>& g, const std::vector<std::string>& strides) {
  std::string o;
  for (size_t d = 0; d < g.size(); ++d) o += (d ? " + " : "") + g[d] + " * " + strides[d];
  return o.empty() ? "0" : o;
}

}  // namespace

void Emitter::emit_load_store(const Op& op) {
  bool load = op.kind == OpKind::LoadTile;
  const Value* view = op.operand(0);
  const ViewInfo& vi = view_of(op, view);
  const Value* tile = load ? op.result() : op.operand(1);
  size_t first = load ? 1 : 2;
  int R = view->type.rank();
  if (!tile->type.is_tile() || tile->type.rank() != R) fail(op, "tile rank must equal the view rank");
  if (op.operands.size() != first + static_cast<size_t>(R)) fail(op, "needs one index per view dim");
  std::vector<int64_t> S = shape_of(op, tile);
  ScalarKind t = view->type.elem;
  std::string St = stype(t);
  if (load && prefetched_.count(&op)) return;  // taken over from the previous iteration
  // Program prefetch (EmitProgramPrefetch.cpp): `issue` emits the next program's cp.async
  // copies of this load's in-bounds aligned vectors instead of the load; otherwise a load with
  // a prefetch reads those vectors from shared memory when its buffer holds this program's tile.
  const bool issue = pf_mode_ == PfMode::Issue;
  const ProgramPrefetch* pf = load ? program_prefetch_of(op) : nullptr;
  if (issue && !pf) fail(op, "internal: program prefetch of a load without a plan");
  const bool packed = load && packs_load(op);
  std::string r;
  if (issue) {
    // (no result: the copies only fill shared memory)
  } else if (packed && !load_into_.empty()) {
    r = load_into_;
    name_[tile] = r;
  } else if (packed) {
    r = bind_new(tile);
    line(std::string("tsr::Packed16<") + (t == ScalarKind::BF16 ? "true" : "false") + ", " +
         std::to_string(layout_of(tile).slots) + "> " + r + ";");
    count("packed-loads");
  } else {
    r = load ? declare(op, tile) : nm(tile);
  }
  std::string pad = lit(t, op.has_attr("pad") ? op.attr_number("pad") : 0.0);
  Layout L = layout_of(tile);
  std::string hit;  // this program's tile is in the prefetch buffer
  if (pf && !issue) {
    hit = fresh("hit");
    // (a tile that is the same for every program stays valid once copied)
    line("const bool " + hit + " = " + pf->tag + (pf->invariant ? " >= 0;" : " == tsr_t;"));
  }
  // Chunk c in the prefetch buffer `buf` (the thread's own: no barrier needed).
  const int64_t chunk_bytes = int64_t(L.vec) * scalar_bytes(t);
  auto pf_slot = [&](const std::string& buf, const std::string& c) {
    return buf + " + " + std::to_string(pf->offset) + " + (" + c + " * " + std::to_string(T_) + " + tsr_tid) * " +
           std::to_string(chunk_bytes);
  };
  open("{");
  std::vector<std::string> o(R);
  for (int d = 0; d < R; ++d) {
    o[d] = fresh("o");
    line("const int64_t " + o[d] + " = int64_t(" + nm(op.operand(first + d)) + ") * " + std::to_string(S[d]) + ";");
  }
  // Per element: coordinates, bounds, and the access itself.
  auto scalar_access = [&](const std::string& s, const std::string& e, const std::string& guard) {
    std::vector<std::string> c = coords(e, S), g(R);
    for (int d = 0; d < R; ++d) g[d] = "(" + o[d] + " + " + c[d] + ")";
    std::string ok = "(" + in_bounds(g, vi.dims) + ")";
    if (guard != "true") ok = guard + " && " + ok;
    std::string addr = vi.ptr + "[" + offset(g, vi.strides) + "]";
    if (load) line(r + "[" + s + "] = " + ok + " ? " + load_conv(t, addr) + " : " + pad + ";");
    else line("if (" + ok + ") " + addr + " = " + store_conv(t, r + "[" + s + "]") + ";");
  };
  bool vector_path = !L.replicated && L.vec > 1 && S[R - 1] % L.vec == 0;
  if (vector_path) {
    if (!issue) count("vector-accesses");
    const std::string V = std::to_string(L.vec);
    // A 16-bit float tile stored straight from a cast of an f32 tile: round the f32 values once,
    // two at a time (cvt.rn.bf16x2 / f16x2), instead of rounding to a float array first and
    // converting that again (the same bits: rounding an already rounded value is exact).
    // pair_stores = 0 turns this off (for comparisons).
    const ConstexprDecl* ps = k_.find_constexpr("pair_stores");
    const bool pair_store = !load && (t == ScalarKind::BF16 || t == ScalarKind::F16) && !(ps && ps->value == 0);
    std::string src = r;
    if (pair_store && tile->def && tile->def->kind == OpKind::Cast && tile->def->operand(0)->type.is_tile() &&
        tile->def->operand(0)->type.elem == ScalarKind::F32 && name_.count(tile->def->operand(0)) &&
        !frag_tiles_.count(tile->def->operand(0))) {
      src = nm(tile->def->operand(0));
      count("stores-from-f32");
    }
    const std::string pair_fn = t == ScalarKind::BF16 ? "tsr::f2bf2(" : "tsr::f2h2(";
    const ConstexprDecl* cs = k_.find_constexpr("stream_stores");
    const std::string store_fn = cs && cs->value == 1 ? "tsr::store_vec_cs<" : "tsr::copy_vec<";
    // The in-bounds, aligned access of chunk `c` at element offset `off` (buffer `buf` for the
    // paths that convert after it).
    auto vector_body = [&](const std::string& c, const std::string& s0, const std::string& off, const std::string& buf) {
      if (issue) {
        for (int64_t piece = 0; piece < chunk_bytes; piece += 16) {
          const std::string at = piece ? " + " + std::to_string(piece) : "";
          line("tsr::cp_async_16(tsr::smem_u32(" + pf_slot("tsr_pf_nxt", c) + at + "), reinterpret_cast<const unsigned char*>(" +
               vi.ptr + " + " + off + ")" + at + ");");
        }
        return;
      }
      // A load's vector from `from` (a pointer expression of the storage type): into the packed
      // words or into the buffer.
      auto load_vec = [&](const std::string& from) {
        if (packed)
          line("tsr::copy_vec<uint32_t, " + std::to_string(L.vec / 2) + ">(" + r + ".w + " + c + " * " +
               std::to_string(L.vec / 2) + ", reinterpret_cast<const uint32_t*>(" + from + "));");
        else
          line("tsr::copy_vec<" + St + ", " + V + ">(" + buf + ", " + from + ");");
      };
      if (!hit.empty()) {
        open("if (" + hit + ") {");
        load_vec(packed ? pf_slot("tsr_pf_cur", c) : "reinterpret_cast<const " + St + "*>(" + pf_slot("tsr_pf_cur", c) + ")");
        --ind_;
        open("} else {");
      }
      if (load) {
        load_vec(vi.ptr + " + " + off);
      } else if (pair_store) {
        const std::string W = std::to_string(L.vec / 2);
        line("uint32_t " + buf + "w[" + W + "];");
        line("#pragma unroll");
        line("for (int v_ = 0; v_ < " + W + "; ++v_) " + buf + "w[v_] = " + pair_fn + src + "[" + s0 + " + 2 * v_], " +
             src + "[" + s0 + " + 2 * v_ + 1]);");
        // stream_stores = 1: the vector goes out with st.global.cs (evict first), so that a
        // kernel's output does not push out of L2 what it reads again (a row kernel's second
        // pass over a long row).
        line(store_fn + "uint32_t, " + W + ">(reinterpret_cast<uint32_t*>(" + vi.ptr + " + " + off + "), " + buf + "w);");
      } else {
        line("#pragma unroll");
        line("for (int v_ = 0; v_ < " + V + "; ++v_) " + buf + "[v_] = " + store_conv(t, src + "[" + s0 + " + v_]") + ";");
        line(store_fn + St + ", " + V + ">(" + vi.ptr + " + " + off + ", " + buf + ");");
      }
      if (!hit.empty()) close();
    };
    // Opens the unrolled loop over chunks: the chunk's first element e0 (slot s0), its
    // coordinates in the view g and its offset.
    struct Chunk {
      std::string c, e0, s0, off;
      std::vector<std::string> g;
    };
    auto open_chunk = [&] {
      Chunk ch;
      ch.c = fresh("c");
      line("#pragma unroll");
      open("for (int " + ch.c + " = 0; " + ch.c + " < " + std::to_string(L.chunks) + "; ++" + ch.c + ") {");
      ch.e0 = fresh("e"), ch.s0 = ch.c + " * " + V;
      line("const int " + ch.e0 + " = " + elem_expr(L, ch.s0) + ";");
      std::vector<std::string> cc = coords(ch.e0, S);
      for (int d = 0; d < R; ++d) {
        ch.g.push_back(fresh("g"));
        line("const int64_t " + ch.g[d] + " = " + o[d] + " + " + cc[d] + ";");
      }
      ch.off = fresh("off");
      line("const int64_t " + ch.off + " = " + offset(ch.g, vi.strides) + ";");
      return ch;
    };
    // A loaded (not packed) vector from the storage-type buffer into the compute-type slots.
    auto convert_buf = [&](const std::string& s0, const std::string& buf) {
      line("#pragma unroll");
      line("for (int v_ = 0; v_ < " + V + "; ++v_) " + r + "[" + s0 + " + v_] = " + load_conv(t, buf + "[v_]") + ";");
    };
    // whole_tile_checks = 1 (opt-in): test the whole tile in bounds, its first vector aligned and
    // every row stride a multiple of the vector (chunks then start at aligned addresses, VEC
    // divides the last dim) once, and let every chunk take the vector access with no per-chunk
    // test: one test per tile instead of a 64-bit bounds and alignment test per 16 bytes (a row
    // kernel's hot path); a tile at a ragged or unaligned edge takes the chunk-by-chunk path
    // below. Off by default: fewer instructions, but ptxas gives softmax at BLOCK_N = 4096 64
    // registers with it instead of 56 (8 CTAs per SM instead of 9); cuda_bench --tune measures it.
    // On by default in a program-prefetch kernel (one CTA of capped registers per SM, where the
    // instructions per element are what is left: H200, softmax 4096x32768 bf16 3443 -> 3737 GB/s).
    const ConstexprDecl* wt = k_.find_constexpr("whole_tile_checks");
    const bool whole_tile = wt ? wt->value == 1 : prog_persistent_;
    if (whole_tile) {
      const int64_t piece = std::min<int64_t>(16, int64_t(L.vec) * scalar_bytes(t)) / scalar_bytes(t);
      std::string whole;
      for (int d = 0; d < R; ++d) {
        whole += (d ? " && " : "") + o[d] + " >= 0 && " + o[d] + " + " + std::to_string(S[d]) + " <= " + vi.dims[d];
        if (d < R - 1 && S[d] > 1 && piece > 1) whole += " && " + vi.strides[d] + " % " + std::to_string(piece) + " == 0";
      }
      whole += " && tsr::aligned_vec<" + St + ", " + V + ">(" + vi.ptr + " + " + offset(o, vi.strides) + ")";
      std::string wv = fresh("whole");
      line("const bool " + wv + " = " + whole + ";");
      open("if (" + wv + ") {");
      {
        Chunk ch = open_chunk();
        std::string buf = fresh("buf");
        if ((load && !packed && !issue) || (!load && !pair_store)) line(St + " " + buf + "[" + V + "];");
        std::string valid = valid_expr(L, ch.s0);
        if (valid != "true") open("if (" + valid + ") {");
        vector_body(ch.c, ch.s0, ch.off, buf);
        if (load && !packed && !issue) convert_buf(ch.s0, buf);
        if (valid != "true") close();
        close();
      }
      --ind_;
      open("} else {");
    }
    Chunk ch = open_chunk();
    const std::string &c = ch.c, &s0 = ch.s0, &off = ch.off;
    const std::vector<std::string>& g = ch.g;
    // The vector lies in one row of the tile (VEC divides the last dim): only the last
    // coordinate varies across it.
    std::string rows_ok = "true";
    if (L.part % (int64_t(L.vec) * T_) != 0) rows_ok = local_elem_expr(L, s0) + " < " + std::to_string(L.part);
    for (int d = 0; d < R - 1; ++d) rows_ok += " && " + g[d] + " >= 0 && " + g[d] + " < " + vi.dims[d];
    std::string rok = fresh("rok");
    line("const bool " + rok + " = " + rows_ok + ";");
    std::string ok = rok + " && " + g[R - 1] + " >= 0 && " + g[R - 1] + " + " + V + " <= " + vi.dims[R - 1];
    ok += " && tsr::aligned_vec<" + St + ", " + V + ">(" + vi.ptr + " + " + off + ")";
    std::string buf = fresh("buf");
    if (issue) {  // ragged or unaligned vectors are read at the load itself
      open("if (" + ok + ") {");
      vector_body(c, s0, off, buf);
      close();
      close();
      if (whole_tile) close();
      close();
      return;
    }
    if (!pair_store) line(St + " " + buf + "[" + V + "];");
    open("if (" + ok + ") {");
    vector_body(c, s0, off, buf);
    --ind_;
    open("} else {");
    line("#pragma unroll");
    open("for (int v_ = 0; v_ < " + V + "; ++v_) {");
    // Ragged or unaligned: element by element from the same base offset (cheap addresses, so
    // that this rarely taken path does not hold registers across the fast one).
    std::string gc = fresh("gc");
    line("const int64_t " + gc + " = " + g[R - 1] + " + v_;");
    std::string eok = "(" + rok + " && " + gc + " >= 0 && " + gc + " < " + vi.dims[R - 1] + ")";
    std::string addr = vi.ptr + "[" + off + " + v_ * " + vi.strides[R - 1] + "]";
    // Both paths fill the storage-type buffer and convert after the join, so that only the
    // packed vector is live where they meet (half the registers for 16-bit types).
    if (load) line(buf + "[v_] = " + eok + " ? " + addr + " : " + St + "(" + store_conv(t, pad) + ");");
    else line("if (" + eok + ") " + addr + " = " + store_conv(t, src + "[" + s0 + " + v_]") + ";");
    close();
    if (packed) {
      line("#pragma unroll");
      line("for (int v_ = 0; v_ < " + std::to_string(L.vec / 2) + "; ++v_) " + r + ".w[" + c + " * " +
           std::to_string(L.vec / 2) + " + v_] = uint32_t(" + buf + "[2 * v_]) | (uint32_t(" + buf + "[2 * v_ + 1]) << 16);");
    }
    close();
    if (load && !packed) convert_buf(s0, buf);
    close();
    if (whole_tile) close();
  } else {
    if (issue) fail(op, "internal: program prefetch of a load off the vector path");
    slots(L, [&](const std::string& s) {
      std::string e = fresh("e");
      line("const int " + e + " = " + elem_expr(L, s) + ";");
      scalar_access(s, e, load ? valid_expr(L, s) : owner_expr(L, s));
    });
  }
  close();
  if (pf && !issue) {
    if (pf_buffers_ == 2) issue_program_prefetch(*pf);
    else pending_pf_.push_back(pf);
  }
}

bool Emitter::packs_load(const Op& load) { return packs_value(load.result()); }

bool Emitter::packed_in_layouts(const Value* v) {
  return lowered_ && v->type.is_tile() && (v->type.elem == ScalarKind::BF16 || v->type.elem == ScalarKind::F16) &&
         packs_value(v);
}

std::string Emitter::packed_type(const Value* v) {
  return std::string("tsr::Packed16<") + (v->type.elem == ScalarKind::BF16 ? "true" : "false") + ", " +
         std::to_string(dist_of(v).slots()) + ">";
}

bool Emitter::packs_value(const Value* v) {
  if (auto it = packed_.find(v); it != packed_.end()) return it->second;
  if (users_.empty())
    walk(const_cast<Block&>(*k_.body), [&](Op& o) {
      for (const Value* x : o.operands) users_[x].push_back(&o);
    });
  auto users = [&](const Value* x) {
    auto it = users_.find(x);
    return it == users_.end() ? std::vector<const Op*>{} : it->second;
  };
  // The layout emitter: the values that must share v's representation, joined through `if`
  // results and a for's carried values (a load carried one iteration ahead by
  // prefetch-loop-loads: the loop's operand, its argument, the `if` at the body's top and the
  // yields). The planning emitter packs loads alone.
  std::vector<const Value*> members{v};
  std::set<const Value*> seen{v};
  auto join = [&](const Value* x) {
    if (x && seen.insert(x).second) members.push_back(x);
  };
  auto owner_of_arg = [](const Value* x) { return !x->def && x->block ? x->block->parent : nullptr; };
  for (size_t i = 0; lowered_ && i < members.size(); ++i) {
    const Value* x = members[i];
    const Op* def = x->def;
    const Op* loop = def && def->kind == OpKind::For ? def : nullptr;
    size_t j = def ? static_cast<size_t>(x->index) : 0;
    if (const Op* f = owner_of_arg(x); f && f->kind == OpKind::For && x->index >= 1) loop = f, j = static_cast<size_t>(x->index - 1);
    if (def && def->kind == OpKind::If)
      for (const auto& r : def->regions)
        if (const Op* y = r->terminator(); y && j < y->operands.size()) join(y->operand(j));
    if (loop && j + 3 < loop->operands.size()) {
      join(loop->operand(3 + j));
      join(loop->result(j));
      join(loop->region(0).args[j + 1]);
      if (const Op* y = loop->region(0).terminator(); y && j < y->operands.size()) join(y->operand(j));
    }
    for (const Op* u : users(x)) {
      const Op* owner = u->kind == OpKind::Yield && u->parent ? u->parent->parent : nullptr;
      for (size_t q = 0; q < u->operands.size(); ++q) {
        if (u->operands[q] != x) continue;
        if (owner && (owner->kind == OpKind::If || owner->kind == OpKind::For) && q < owner->results.size())
          join(owner->result(q));
        else if (u->kind == OpKind::For && q >= 3)
          join(u->result(q - 3));
      }
    }
  }
  // Every use a cast to f32 whose result is read slot by slot: elementwise math, reductions,
  // register-copy shape ops, stores and yields (what indexes a tile with compile-time slots).
  auto read_by_slot = [](const Op& o) {
    switch (o.info().cls) {
      case OpClass::Unary: case OpClass::Binary: case OpClass::Compare: case OpClass::Ternary:
      case OpClass::Cast: case OpClass::Reduce: return true;
      default:
        return o.kind == OpKind::ExpandDims || o.kind == OpKind::Reshape || o.kind == OpKind::StoreTile ||
               o.kind == OpKind::Yield;
    }
  };
  int64_t casts = 0;  // (the class must be read somewhere: by a cast to f32)
  auto member_ok = [&](const Value* x) {
    const ScalarKind t = x->type.elem;
    if ((t != ScalarKind::BF16 && t != ScalarKind::F16) || !x->type.is_tile() || !shape_is_static(x->type.shape) ||
        x->type != v->type)
      return false;
    // Only the vector path fills whole words; its vectors are even. (The layout emitter's runs
    // along the last dim: lowered_load_store fills each run's words.)
    const Layout L = layout_of(x);
    const std::vector<int64_t> S = static_shape(x->type.shape);
    if (lowered_) {
      if (S.empty() || lowered_vector_width(x) % 2 != 0) return false;
    } else if (L.replicated || L.vec < 2 || S.empty() || S.back() % L.vec != 0) {
      return false;
    }
    // Made by a load, or (the layout emitter) an `if` or a for's carried value of members.
    const Op* f = owner_of_arg(x);
    if (!(x->def && x->def->kind == OpKind::LoadTile) &&
        !(lowered_ && ((x->def && (x->def->kind == OpKind::If || x->def->kind == OpKind::For)) ||
                       (f && f->kind == OpKind::For))))
      return false;
    // A loop's argument is its carried variable, which the yield overwrites: a cast of it (a
    // view of those words, alias_packed_cast) must not be yielded too, or the yield would read
    // the next iteration's tile through it.
    const bool carried = f && f->kind == OpKind::For;
    for (const Op* u : users(x)) {
      const Op* owner = u->kind == OpKind::Yield && u->parent ? u->parent->parent : nullptr;
      if (lowered_ && ((owner && (owner->kind == OpKind::If || owner->kind == OpKind::For)) || u->kind == OpKind::For))
        continue;  // into a member: an `if`'s or a loop's yield, a loop's carried operand (joined above)
      if (u->kind != OpKind::Cast || u->result()->type.elem != ScalarKind::F32) return false;
      ++casts;
      for (const Op* w : users(u->result()))
        if (!read_by_slot(*w) || (carried && w->kind == OpKind::Yield)) return false;
    }
    return true;
  };
  bool ok = true;
  if (const ConstexprDecl* d = k_.find_constexpr("pack_narrow_loads"); d && d->value == 0) ok = false;
  for (const Value* x : members) ok = ok && member_ok(x);
  ok = ok && casts > 0;
  for (const Value* x : members) packed_[x] = ok;
  return ok;
}

std::vector<const Op*> Emitter::begin_prefetch(const Op& for_op) {
  std::vector<const Op*> loads;
  // (The layout emitter prints prefetch-loop-loads' IR for the same knob: the loads are ahead
  // in the IR already.)
  if (lowered_) return loads;
  if (const ConstexprDecl* d = k_.find_constexpr("prefetch_loads"); !d || d->value == 0) return loads;
  Block& body = for_op.region(0);
  bool writes = false;
  walk(body, [&](Op& o) {
    OpClass c = o.info().cls;
    writes |= o.kind == OpKind::StoreTile || o.kind == OpKind::Scatter || c == OpClass::Raw || c == OpClass::Struct ||
              (c == OpClass::Memory && o.kind != OpKind::LoadTile && o.kind != OpKind::Gather);
  });
  if (writes) return loads;
  const Value* iv = body.args[0];
  for (const auto& o : body.ops) {
    if (o->kind != OpKind::LoadTile || !packs_load(*o)) continue;
    bool ok = true;
    for (size_t i = 1; i < o->operands.size(); ++i) {
      const Value* x = o->operand(i);
      bool inside = x->def ? x->def->parent == &body : x->block == &body;
      ok &= x == iv || !inside;
    }
    if (ok) loads.push_back(o.get());
  }
  if (loads.empty()) return loads;
  // The first iteration's tiles, before the loop (when it runs at all).
  const std::string lb = nm(for_op.operand(0)), ub = nm(for_op.operand(1)), step = nm(for_op.operand(2));
  for (const Op* l : loads) {
    std::string buf = fresh("pre");
    prefetch_buf_[l] = buf;
    line(std::string("tsr::Packed16<") + (l->result()->type.elem == ScalarKind::BF16 ? "true" : "false") + ", " +
         std::to_string(layout_of(l->result()).slots) + "> " + buf + ";");
  }
  open("if (" + step + " > 0 && " + lb + " < " + ub + ") {");
  name_[iv] = lb;
  for (const Op* l : loads) {
    load_into_ = prefetch_buf_[l];
    emit_op(*l);
  }
  load_into_.clear();
  close();
  count("prefetched-loads", static_cast<int64_t>(loads.size()));
  return loads;
}

void Emitter::prefetch_next(const Op& for_op, const std::vector<const Op*>& loads, const std::string& iv) {
  if (loads.empty()) return;
  const Value* iv_arg = for_op.region(0).args[0];
  for (const Op* l : loads) {
    // This iteration's tile: the one the previous iteration (or the loop's entry) issued.
    std::string cur = fresh("cur");
    line("const auto " + cur + " = " + prefetch_buf_[l] + ";");
    name_[l->result()] = cur;
  }
  std::string next = fresh("ivn");
  line("const int64_t " + next + "_ = " + iv + "_ + " + nm(for_op.operand(2)) + ";");
  open("if (" + next + "_ < " + nm(for_op.operand(1)) + ") {");
  line("const int32_t " + next + " = int32_t(" + next + "_);");
  name_[iv_arg] = next;
  for (const Op* l : loads) {
    std::string cur = name_[l->result()];
    load_into_ = prefetch_buf_[l];
    emit_op(*l);
    name_[l->result()] = cur;
    prefetched_[l] = true;
  }
  load_into_.clear();
  close();
  name_[iv_arg] = iv;
}

bool Emitter::alias_packed_cast(const Op& cast) {
  auto it = packed_.find(cast.operand(0));
  if (it == packed_.end() || !it->second || cast.result()->type.elem != ScalarKind::F32) return false;
  line("const auto& " + bind_new(cast.result()) + " = " + nm(cast.operand(0)) + ";  // converts at each use");
  return true;
}

void Emitter::emit_gather_scatter(const Op& op) {
  bool gather = op.kind == OpKind::Gather;
  const Value* view = op.operand(0);
  const ViewInfo& vi = view_of(op, view);
  int R = view->type.rank();
  size_t first = gather ? 1 : 2;
  size_t n = op.operands.size() - first;
  if (n != static_cast<size_t>(R) && n != static_cast<size_t>(R) + 1) fail(op, "needs one index per view dim and an optional mask");
  bool has_mask = n == static_cast<size_t>(R) + 1;
  const Value* shape_v = op.operand(first);
  ScalarKind t = view->type.elem;
  std::string pad = lit(t, op.has_attr("pad") ? op.attr_number("pad") : 0.0);
  auto at = [&](const Value* v, const std::string& s) { return v->type.is_tile() ? nm(v) + "[" + s + "]" : nm(v); };
  auto access = [&](const std::string& s, const std::string& guard, const std::string& dst) {
    std::vector<std::string> g(R);
    for (int d = 0; d < R; ++d) g[d] = "int64_t(" + at(op.operand(first + d), s) + ")";
    std::string ok = "(" + in_bounds(g, vi.dims) + ")";
    if (has_mask) ok = "(" + at(op.operand(first + R), s) + " != 0) && " + ok;
    if (guard != "true") ok = guard + " && " + ok;
    std::string addr = vi.ptr + "[" + offset(g, vi.strides) + "]";
    if (gather) line(dst + " = " + ok + " ? " + load_conv(t, addr) + " : " + pad + ";");
    else line("if (" + ok + ") " + addr + " = " + store_conv(t, at(op.operand(1), s)) + ";");
  };
  if (gather) {
    const Value* r = op.result();
    std::string res = declare(op, r);
    if (r->type.is_tile()) {
      Layout L = layout_of(r);
      slots(L, [&](const std::string& s) { access(s, valid_expr(L, s), res + "[" + s + "]"); });
    } else {
      access("0", "true", res);
    }
  } else {
    // Duplicate indices: the thread order decides (the interpreter's "last wins" is not kept).
    if (shape_v->type.is_tile()) {
      Layout L = layout_of(shape_v);
      // A masked scatter often keeps few elements (a compaction's: topk's segments keep ~2 of
      // 4096): where none of the thread's slots is kept, one branch skips every slot's address
      // and bounds arithmetic, which nvcc otherwise predicates slot by slot (~18 instructions
      // each). Warps whose threads keep nothing skip together.
      const Value* mask = has_mask ? op.operand(first + R) : nullptr;
      const bool guard = mask && mask->type.is_tile() && L.slots > 1;
      if (guard) {
        std::string any = fresh("any");
        line("bool " + any + " = false;");
        slots(L, [&](const std::string& s) {
          const std::string own = owner_expr(L, s);  // (a slot the thread does not own may be unset)
          line(any + " |= " + (own == "true" ? "" : own + " && ") + at(mask, s) + " != 0;");
        });
        open("if (" + any + ") {");
      }
      slots(L, [&](const std::string& s) { access(s, owner_expr(L, s), ""); });
      if (guard) close();
    } else {
      access("0", "(tsr_tid == 0)", "");
    }
  }
}

void Emitter::emit_atomic(const Op& op) {
  bool cas = op.kind == OpKind::AtomicCas;
  const Value* view = op.operand(0);
  const ViewInfo& vi = view_of(op, view);
  int R = view->type.rank();
  size_t first = cas ? 3 : 2;
  size_t n = op.operands.size() - first;
  if (n != static_cast<size_t>(R) && !(n == static_cast<size_t>(R) + 1 && !cas))
    fail(op, "needs one index per view dim" + std::string(cas ? "" : " and an optional mask"));
  bool has_mask = n == static_cast<size_t>(R) + 1;
  ScalarKind t = view->type.elem;
  std::string St = stype(t), C = ctype(t);
  std::string kind = cas ? "cas" : op.attr_string("kind");
  if (kind != "add" && kind != "max" && kind != "min" && kind != "cas") fail(op, "unknown atomic kind '" + kind + "'");
  const Value* r = op.result();
  std::string res = declare(op, r);
  auto at = [&](const Value* v, const std::string& s) { return v->type.is_tile() ? nm(v) + "[" + s + "]" : nm(v); };
  // The read-modify-write of one element; returns the old value in the compute type.
  auto rmw = [&](const std::string& p, const std::string& val, const std::string& cmp) -> std::string {
    bool f = is_float(t);
    if (kind == "add") {
      if (t == ScalarKind::F32 || t == ScalarKind::F64) return "atomicAdd(" + p + ", " + val + ")";
      if (t == ScalarKind::I32 || t == ScalarKind::U32)
        return C + "(atomicAdd(reinterpret_cast<unsigned*>(" + p + "), unsigned(" + val + ")))";
      if (t == ScalarKind::I64 || t == ScalarKind::U64)
        return C + "(atomicAdd(reinterpret_cast<unsigned long long*>(" + p + "), (unsigned long long)(" + val + ")))";
      std::string nv = f ? store_conv(t, fround(t, load_conv(t, "o_") + " + v_")) : St + "(uint32_t(o_) + uint32_t(v_))";
      if (t == ScalarKind::I1) nv = "uint8_t((o_ + v_) & 1)";
      return load_conv(t, "tsr::atomic_rmw<" + St + ">(" + p + ", [=](" + St + " o_) { const " + C + " v_ = " + val +
                              "; return " + St + "(" + nv + "); })");
    }
    if (kind == "max" || kind == "min") {
      bool mx = kind == "max";
      if (t == ScalarKind::I32) return std::string(mx ? "atomicMax(" : "atomicMin(") + p + ", " + val + ")";
      if (t == ScalarKind::U32) return std::string(mx ? "atomicMax(" : "atomicMin(") + p + ", " + val + ")";
      if (t == ScalarKind::I64)
        return "int64_t(" + std::string(mx ? "atomicMax(" : "atomicMin(") + "reinterpret_cast<long long*>(" + p + "), (long long)(" + val + ")))";
      if (t == ScalarKind::U64)
        return "uint64_t(" + std::string(mx ? "atomicMax(" : "atomicMin(") + "reinterpret_cast<unsigned long long*>(" + p + "), (unsigned long long)(" + val + ")))";
      std::string fn = std::string(f ? "tsr::f" : "tsr::i") + kind + (f ? "_nan<" : "<") + C + ">";
      return load_conv(t, "tsr::atomic_rmw<" + St + ">(" + p + ", [=](" + St + " o_) { const " + C + " v_ = " + val +
                              "; return " + St + "(" + store_conv(t, fn + "(" + load_conv(t, "o_") + ", v_)") + "); })");
    }
    return load_conv(t, "tsr::atomic_rmw<" + St + ">(" + p + ", [=](" + St + " o_) { const " + C + " v_ = " + val +
                            "; const " + C + " c_ = " + cmp + "; return tsr::same_bits(o_, " + St + "(" +
                            store_conv(t, "c_") + ")) ? " + St + "(" + store_conv(t, "v_") + ") : o_; })");
  };
  auto access = [&](const std::string& s, const std::string& guard, const std::string& dst) {
    std::vector<std::string> g(R);
    for (int d = 0; d < R; ++d) g[d] = "int64_t(" + at(op.operand(first + d), s) + ")";
    std::string ok = "(" + in_bounds(g, vi.dims) + ")";
    if (has_mask) ok = "(" + at(op.operand(first + R), s) + " != 0) && " + ok;
    if (guard != "true") ok = guard + " && " + ok;
    std::string val = at(op.operand(cas ? 2 : 1), s), cmp = cas ? at(op.operand(1), s) : "";
    line(dst + " = " + C + "(0);");
    line("if (" + ok + ") " + dst + " = " + C + "(" + rmw(vi.ptr + " + (" + offset(g, vi.strides) + ")", val, cmp) + ");");
  };
  if (r->type.is_tile()) {
    Layout L = layout_of(r);
    slots(L, [&](const std::string& s) { access(s, owner_expr(L, s), res + "[" + s + "]"); });
    if (L.replicated || (L.dist && L.dist->owner_expr() != "true")) {
      // Each element was done by one thread (of its copies); share the old values.
      std::string p = smem_ptr(C, 0, L.numel * 8);
      stage(r, p);
      barrier();
      gather_into(r, res, [&](const std::string& e) { return p + "[" + e + "]"; });
      count("layout-conversions");
    }
  } else {
    access("0", "(tsr_tid == 0)", res);
    std::string p = smem_ptr(C, 0, 8);
    stage(r, p);
    barrier();
    line(res + " = " + p + "[0];");
  }
}

}  // namespace tessera::cudagen
