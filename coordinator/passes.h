// The passes of a sweep (SweepSubmit::refine_pass, confirm_top): screen,
// refine, confirm, as state machines per GPU model and per key, and the
// pure rules that pick each pass's contenders from a key's stored rows. The
// scheduler (scheduler_passes.cc) asks them when to create a pass's units.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config_source.h"
#include "opspec/sweep_file.h"
#include "unit.h"

namespace tune {

// The passes of one model: screen, then confirm. Its (config, shape)
// pairs not yet cut into units and its units not yet finished; when both
// reach 0 its confirm units are created (once).
struct ModelPasses {
  uint64_t unsliced = 0, open_units = 0;
  bool confirm_created = false;
  bool WorkLeft() const { return unsliced > 0 || open_units > 0; }
  // The model's confirm phase: once, when its screening and refine units
  // are all done.
  bool ConfirmNow() {
    if (WorkLeft() || confirm_created) return false;
    confirm_created = true;
    return true;
  }
};
// The passes of one (model, op, dtype, shape) key (PoolKey): screen, then
// refine. Its configs not yet cut into units and its screening units not
// yet finished. Once every config of the key is cut, the first device
// that runs dry refines the contenders screened so far (refine_early);
// when the screening is done the rest are refined against the best stored
// (refine_created), while the next shapes screen. The best's refined
// figure may rise more than the others' (it was screened too fast) and
// bring other configs near it: each time a refine unit of the key is done
// (refine_stale), those are refined too, while the pass's other units
// still run rather than in a round after its slowest one.
struct KeyPasses {
  uint64_t unsliced = 0, open_screen_units = 0;
  uint64_t open_screen_configs = 0;  // the configs of those units: a search's proposals in flight
  bool refine_early = false, refine_created = false, refine_stale = false;
  std::set<std::string> refine_queued;  // Config::Id()s that have a refine unit
  bool Screened() const { return unsliced == 0 && open_screen_units == 0; }
  // The key's refine pass as a state machine: whether to refine its
  // contenders now, and the transition that makes it so. `device_idle`:
  // asked because a device of the model has nothing to lease (an early
  // refine, once, when every config is cut); otherwise asked after a unit
  // of the model ended (at the end of the screening, once; then again
  // after each refine unit of the key, whose refined best may have risen).
  bool RefineNow(bool device_idle);
};
// A sweep's passes, per model and per key, kept in step with its units.
struct SweepPasses {
  std::map<std::string, ModelPasses> model;
  std::map<PoolKey, KeyPasses> key;
  static PoolKey KeyOf(const Unit& u) { return PoolKey{u.gpu_model, u.op, u.dtype, u.shape_key}; }
  // `n` configs of `key` wait to be cut into units (n > 0), or were cut or
  // dropped (n < 0).
  void Unsliced(const PoolKey& key, int64_t n);
  // A unit was created; it ended (a refine unit's end makes its key's
  // refine stale: its best may have risen).
  void Opened(const Unit& u);
  void Closed(const Unit& u);
};

// The confirm phase's contenders among `valid`, the valid rows of one key:
// the `top` best in the store's order (Measurement::RanksAhead: a refined
// figure before a screening one, then the faster), and after them every
// config of the leader's pass within kConfirmAlsoWithin of its figure, up
// to twice `top` (and kMaxConfirmTop) in all: a near-tie just past the top N is settled by the
// interleaved confirm timing too, not by where the screening put it.
inline constexpr double kConfirmAlsoWithin = 0.02;
std::vector<Config> ContendersOf(std::vector<Measurement> valid, uint32_t top);

// The refine pass of a sweep (SweepSubmit::refine_pass) for one (model, op,
// dtype, shape): the configs whose screening figure came within `within` of
// the best one, and that best (us, in screening terms: NearBestOf). Configs
// with a refined or confirmed row are left out (a sweep resumed after its
// refine units ran); none at all once the key has a confirmed row.
struct NearBest {
  std::vector<Config> configs;
  double best_us = 0;
};

// The refine pass's contenders among `valid`, the valid rows of one key: the
// configs with only a screening row whose figure is within `within` of the
// best, in screening terms. A refined figure is taken in another state of
// its device than screening's (a device hot from the next shape's screening
// runs the refine units of the last), so refined (and confirmed) figures are
// brought to screening terms by the median ratio of their figure to the
// screening one they replaced (Measurement::screen_us), once five rows have
// one. The window then grows only where the best's refined figure rose more
// than the others': a best that was screened too fast.
NearBest NearBestOf(const std::vector<Measurement>& valid, double within);
}  // namespace tune
