// The simulated rendezvous behind the Backend seam (plan/backend.h): the ranks of one world as
// threads of this process, their collectives matched by the simulator's own matcher
// (sim/rendezvous.h): per process group by c10d sequence number, with the signature checked,
// so a desync fails every member with CommError kMismatch instead of pairing different calls.
// A rank can be killed: its arrivals are withdrawn and its peers' works fail with kPeerGone.
// The simulator's event loop drives the same matcher in virtual time; this runs it in real
// time, for the typed Backend suite and for tests of code that issues collectives.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "plan/backend.h"
#include "sim/rendezvous.h"

namespace petrsim::sim {

class RendezvousWorld {
 public:
  RendezvousWorld(uint32_t world_size, std::chrono::milliseconds timeout);

  // Rank `rank`'s Backend; the world must outlive it.
  std::unique_ptr<comm::Backend> Join(uint32_t rank);

  // Rank `rank`'s process is gone: collectives it had joined but that had not completed can no
  // longer complete, and every wait on an incomplete collective fails with kPeerGone.
  void Kill(uint32_t rank);

 private:
  friend class RendezvousBackend;
  friend class RendezvousWork;
  struct Payload {
    Collective first;                         // the first arrival's call (the instance points here)
    std::vector<std::vector<double>> inputs;  // per rank, once it arrived
    std::string mismatch;                     // why the instance can never complete; empty: none
    uint32_t taken = 0;                       // members done with it (result read or failed)
  };
  using Key = std::pair<uint32_t, uint64_t>;  // process group id, seq

  uint32_t GroupId(const std::string& name);  // mutex_ held
  void Release(const Key& key);               // mutex_ held: a member is done with the instance

  uint32_t world_size_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  Rendezvous<Collective> rendezvous_;
  std::map<std::string, uint32_t> group_ids_;
  std::vector<std::vector<uint64_t>> next_seq_;  // per rank, per group id
  std::map<Key, Payload> payloads_;
  std::set<uint32_t> dead_;
};

}  // namespace petrsim::sim
