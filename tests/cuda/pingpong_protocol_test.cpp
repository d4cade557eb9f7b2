// The ping-pong consumers' barrier protocol (EmitLowered.cpp, emit_warp_specialized_body and
// emit_tma_ring_loop), as a model run under random interleavings, without a GPU: one producer
// thread fills an S-stage ring in program order (waiting for a stage's "empty" barrier of the
// phase before), and two consumer warpgroups of 4 warps each take the CTA's programs 2j + c,
// starting consumer c's j-th at ring iteration (2j + c) * trips, waiting for a stage's "full"
// barrier by parity ((rn / S) & 1), releasing it one iteration later (a wgmma group in flight)
// and the last after the loop, and arriving on their order barrier once a loop's last group is
// issued, before that group's reads end (the other consumer may begin meanwhile). mbarriers
// are modelled as the PTX ISA has them: a phase completes when its arrivals are in, and a
// parity wait returns once the phase of that parity before the current one has completed
// (the current phase's parity differs). Every read is checked to see the iteration it waits
// for, from its wait to its release; every agent must finish. Without the order barrier the
// same model reads the other consumer's stages (the test shows it can fail).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tessera {
namespace {

struct Mbar {
  int count = 1, pending = 1;
  uint32_t phase = 0;
  void arrive() {
    if (--pending == 0) {
      ++phase;
      pending = count;
    }
  }
  bool done(uint32_t parity) const { return (phase & 1u) != parity; }
};

struct Result {
  bool finished = true, wrong_read = false;
};

// `programs` programs of `trips` iterations each, an S-stage ring; `order`: the order barriers.
Result run_model(int programs, int trips, int S, bool order, uint32_t seed) {
  constexpr int kWarps = 4;
  std::vector<Mbar> full(S), empty(S), ord(2);
  for (auto& b : empty) b.count = b.pending = kWarps;
  for (auto& b : ord) b.count = b.pending = kWarps;
  std::vector<int64_t> data(S, -1);  // the iteration whose copy a stage holds
  Result res;
  // The producer: iteration `it` of all programs' iterations.
  const int64_t total = int64_t(programs) * trips;
  int64_t it = 0;
  // A consumer warp: its program j, its place in the loop (-1: before the order wait), rn.
  struct Warp {
    int c, j = 0, k = -1;
    uint32_t rn = 0, rn0 = 0;
    bool done = false;
  };
  std::vector<Warp> warps;
  for (int c = 0; c < 2; ++c)
    for (int w = 0; w < kWarps; ++w) warps.push_back(Warp{c});
  std::mt19937 rng(seed);
  // One step of agent a (0: the producer, 1..: the warps); false when it must wait.
  auto step = [&](size_t a) -> bool {
    if (a == 0) {
      if (it >= total) return false;
      const int st = int(it % S);
      if (it >= S && !empty[st].done(uint32_t(it / S - 1) & 1u)) return false;
      data[st] = it;  // the copy lands with its transaction bytes: the phase completes
      full[st].arrive();
      ++it;
      return true;
    }
    Warp& w = warps[a - 1];
    if (w.done) return false;
    const int p = 2 * w.j + w.c;
    if (w.k == -1) {
      if (p >= programs) {
        w.done = true;
        return true;
      }
      if (order) {
        if (w.c == 1 && !ord[0].done(uint32_t(w.j) & 1u)) return false;
        if (w.c == 0 && w.j > 0 && !ord[1].done(uint32_t(w.j - 1) & 1u)) return false;
      }
      w.rn = w.rn0 = uint32_t(p) * uint32_t(trips);
      w.k = 0;
      return true;
    }
    if (w.k < trips) {
      const int st = int(w.rn % S);
      if (!full[st].done((w.rn / S) & 1u)) return false;
      if (data[st] != int64_t(w.rn)) res.wrong_read = true;  // the read begins
      if (w.rn > w.rn0) {
        // The group of the iteration before is done: its reads saw their data to the end.
        const int prev = int((w.rn - 1) % S);
        if (data[prev] != int64_t(w.rn - 1)) res.wrong_read = true;
        empty[prev].arrive();
      }
      ++w.rn, ++w.k;
      return true;
    }
    // The order barrier's arrival once the last group is issued (its reads still going on);
    // then wait_group 0, the last release and the next program.
    if (w.k == trips) {
      if (order) ord[w.c].arrive();
      ++w.k;
      return true;
    }
    if (w.rn > w.rn0) {
      const int prev = int((w.rn - 1) % S);
      if (data[prev] != int64_t(w.rn - 1)) res.wrong_read = true;
      empty[prev].arrive();
    }
    ++w.j;
    w.k = -1;
    return true;
  };
  for (;;) {
    std::vector<size_t> ready;
    for (size_t a = 0; a <= warps.size(); ++a) ready.push_back(a);
    std::shuffle(ready.begin(), ready.end(), rng);
    bool moved = false;
    for (size_t a : ready)
      if (step(a)) {
        moved = true;
        break;
      }
    if (!moved) break;
  }
  for (const Warp& w : warps) res.finished = res.finished && w.done;
  res.finished = res.finished && it == total;
  return res;
}

TEST(PingPongProtocol, OrderBarrierKeepsEveryReadOnItsIteration) {
  for (int programs : {0, 1, 2, 3, 4, 7, 8})
    for (int trips : {0, 1, 2, 3, 5, 9})
      for (int S : {2, 3, 4})
        for (uint32_t seed = 0; seed < 40; ++seed) {
          const Result r = run_model(programs, trips, S, true, seed);
          ASSERT_TRUE(r.finished) << programs << " programs, " << trips << " trips, S " << S << ", seed " << seed;
          ASSERT_FALSE(r.wrong_read) << programs << " programs, " << trips << " trips, S " << S << ", seed " << seed;
        }
}

// Without it a consumer may wait for an iteration phases ahead of its stage's barrier and take
// a completed phase of the same parity for its own (or deadlock).
TEST(PingPongProtocol, WithoutTheOrderBarrierReadsGoWrong) {
  int wrong = 0, stuck = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    const Result r = run_model(6, 5, 4, false, seed);
    wrong += r.wrong_read;
    stuck += !r.finished;
  }
  EXPECT_GT(wrong, 0) << stuck << " of 200 deadlocked";
}

}  // namespace
}  // namespace tessera
