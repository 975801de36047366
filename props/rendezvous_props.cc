// A stateful property (rc::state) of the simulated Backend (sim/rendezvous.h): random sequences of
// per-rank collective arrivals, rank deaths and closes against a plain model of rendezvous
// semantics: a rank's k-th collective on a group meets the others' k-th; an instance completes
// exactly when every rank has arrived with the same signature; a different signature is a
// mismatch that joins nothing; a dead rank's pending arrivals never complete; the oldest
// incomplete instance is the one opened first.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "props/scenario_gen.h"
#include "sim/rendezvous.h"

namespace petrsim::sim {
namespace {

const bool kCaseRateRegistered = props::RegisterCaseRate();

struct Tag {};  // the rendezvous stores only a pointer to the caller's description

// The mutant: a Backend that does not compare signatures (every rank's arrival is passed on with
// the usual signature, as if op, dtype and size were never checked). The property must fail.
bool g_ignore_signatures = false;

struct ModelInstance {
  CollectiveSignature signature;
  std::set<uint32_t> live;  // ranks that arrived and did not die before completion
  bool complete = false;
  bool closed = false;
  int64_t first_ns = 0;
};

struct Model {
  uint32_t world = 1;
  uint32_t groups = 1;
  std::vector<std::vector<uint64_t>> next_seq;  // [rank][group], from 1
  std::vector<bool> dead;
  std::map<std::pair<uint32_t, uint64_t>, ModelInstance> instances;
  int64_t now = 0;
};

struct System {
  explicit System(uint32_t world, uint32_t groups) : rendezvous(world) {
    for (uint32_t g = 0; g < groups; ++g) rendezvous.AddGroup();
  }
  Rendezvous<Tag> rendezvous;
  Tag tag;
};

using Command = rc::state::Command<Model, System>;

// The signature every rank uses at (group, seq), unless a command asks for a deviant one.
CollectiveSignature Usual(uint32_t group, uint64_t seq) {
  return CollectiveSignature{seq % 3 == 0 ? Collective::broadcast : Collective::allreduce, Collective::float32,
                             1 + group * 10 + seq % 2};
}

struct Arrive : Command {
  uint32_t rank = 0;
  uint32_t group = 0;
  bool deviant = false;  // arrives with another element count

  explicit Arrive(const Model& m)
      : rank(*rc::gen::inRange<uint32_t>(0, m.world)),
        group(*rc::gen::inRange<uint32_t>(0, m.groups)),
        deviant(*rc::gen::weightedElement<bool>({{1, true}, {12, false}})) {}

  void checkPreconditions(const Model& m) const override { RC_PRE(!m.dead[rank]); }

  CollectiveSignature Signature(const Model& m) const {
    const uint64_t seq = m.next_seq[rank][group];
    CollectiveSignature signature = Usual(group, seq);
    if (deviant) signature.numel += 1000;
    return signature;
  }

  bool Mismatches(const Model& m) const {
    const auto it = m.instances.find({group, m.next_seq[rank][group]});
    return it != m.instances.end() && !(it->second.signature == Signature(m));
  }

  void apply(Model& m) const override {
    const uint64_t seq = m.next_seq[rank][group];
    const bool mismatch = Mismatches(m);
    m.now += 1;
    if (mismatch) return;  // nothing joined; the simulator stops the run here
    auto [it, opened] = m.instances.try_emplace({group, seq});
    if (opened) {
      it->second.signature = Signature(m);
      it->second.first_ns = m.now;
    }
    it->second.live.insert(rank);
    if (it->second.live.size() == m.world) it->second.complete = true;
    ++m.next_seq[rank][group];
  }

  void run(const Model& m, System& system) const override {
    const uint64_t seq = m.next_seq[rank][group];
    const bool mismatch = Mismatches(m);
    const auto it = m.instances.find({group, seq});
    const size_t live_after = (it == m.instances.end() ? 0 : it->second.live.size()) + 1;
    const CollectiveSignature signature = g_ignore_signatures ? Usual(group, seq) : Signature(m);
    const auto arrival = system.rendezvous.Arrive(group, seq, rank, signature, &system.tag,
                                                  /*iteration=*/0, m.now + 1, /*waiter=*/rank);
    using Outcome = Rendezvous<Tag>::Outcome;
    if (mismatch) {
      RC_ASSERT(arrival.outcome == Outcome::kMismatch);
    } else if (live_after == m.world) {
      RC_ASSERT(arrival.outcome == Outcome::kCompleted);
      RC_ASSERT(arrival.instance->complete);
    } else {
      RC_ASSERT(arrival.outcome == Outcome::kWaiting);
      RC_ASSERT(!arrival.instance->complete);
    }
    RC_ASSERT(arrival.instance->seq == seq);
  }

  void show(std::ostream& os) const override {
    os << "Arrive(rank " << rank << ", group " << group << (deviant ? ", deviant)" : ")");
  }
};

struct Die : Command {
  uint32_t rank = 0;
  explicit Die(const Model& m) : rank(*rc::gen::inRange<uint32_t>(0, m.world)) {}

  void checkPreconditions(const Model& m) const override { RC_PRE(!m.dead[rank]); }

  void apply(Model& m) const override {
    m.dead[rank] = true;
    for (auto& [key, instance] : m.instances) {
      if (!instance.complete) instance.live.erase(rank);
    }
  }

  void run(const Model& m, System& system) const override {
    for (const auto& [key, instance] : m.instances) {
      if (!instance.complete && !instance.closed && instance.live.count(rank) > 0) {
        system.rendezvous.Withdraw(key.first, key.second);
      }
    }
  }

  void show(std::ostream& os) const override { os << "Die(rank " << rank << ")"; }
};

struct Close : Command {
  std::pair<uint32_t, uint64_t> key{0, 0};
  explicit Close(const Model& m) {
    std::vector<std::pair<uint32_t, uint64_t>> closable;
    for (const auto& [k, instance] : m.instances) {
      if (instance.complete && !instance.closed) closable.push_back(k);
    }
    RC_PRE(!closable.empty());
    key = *rc::gen::elementOf(closable);
  }

  void checkPreconditions(const Model& m) const override {
    const auto it = m.instances.find(key);
    RC_PRE(it != m.instances.end() && it->second.complete && !it->second.closed);
  }

  void apply(Model& m) const override { m.instances.at(key).closed = true; }

  void run(const Model&, System& system) const override {
    system.rendezvous.Close(key.first, key.second);
    RC_ASSERT(system.rendezvous.Find(key.first, key.second) == nullptr);
  }

  void show(std::ostream& os) const override { os << "Close(group " << key.first << ", seq " << key.second << ")"; }
};

// No change: the incomplete instance opened first is the model's.
struct CheckOldest : Command {
  explicit CheckOldest(const Model&) {}
  void apply(Model&) const override {}
  void run(const Model& m, System& system) const override {
    const ModelInstance* expected = nullptr;
    std::pair<uint32_t, uint64_t> expected_key{0, 0};
    for (const auto& [key, instance] : m.instances) {
      if (instance.complete) continue;
      if (expected == nullptr || instance.first_ns < expected->first_ns) {
        expected = &instance;
        expected_key = key;
      }
    }
    uint32_t group = 0;
    const auto* oldest = system.rendezvous.OldestIncomplete(&group);
    RC_ASSERT((oldest == nullptr) == (expected == nullptr));
    if (oldest != nullptr) {
      RC_ASSERT(group == expected_key.first);
      RC_ASSERT(oldest->seq == expected_key.second);
      RC_ASSERT(oldest->arrived == expected->live.size());
    }
  }
  void show(std::ostream& os) const override { os << "CheckOldest"; }
};

void BehavesLikeTheModelBody() {
  props::CountCase();
  Model model;
  model.world = *rc::gen::inRange<uint32_t>(1, 5);
  model.groups = *rc::gen::inRange<uint32_t>(1, 3);
  model.next_seq.assign(model.world, std::vector<uint64_t>(model.groups, 1));
  model.dead.assign(model.world, false);
  System system(model.world, model.groups);
  rc::state::check(model, system, rc::state::gen::execOneOfWithArgs<Arrive, Die, Close, CheckOldest>());
}

RC_GTEST_PROP(RendezvousProps, BehavesLikeTheModel, ()) { BehavesLikeTheModelBody(); }

TEST(RendezvousPropsMutants, CommThatIgnoresSignaturesIsCaught) {
  g_ignore_signatures = true;
  const bool passed =
      rc::check("a Backend that never compares signatures must fail the model", [] { BehavesLikeTheModelBody(); });
  g_ignore_signatures = false;
  EXPECT_FALSE(passed);
}

}  // namespace
}  // namespace petrsim::sim
