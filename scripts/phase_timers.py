#!/usr/bin/env python3
# The phase timers behind the "k TSC cycles a frame" figures of docs/decisions.md
# and docs/threading.md:
# patches a *separate* worktree of this repo so that SweepGrid times each
# step of a frame with rdtsc (check and write passes of the batch move,
# relink planning, resolve, the rest of beginUpdate, the cells' refresh and
# sweep, finishUpdate, overflow boxes, merge) and prints the means over
# frames 3.. at exit. Never apply it to the tree you commit from.
#
#   git worktree add /tmp/phases HEAD --detach
#   python3 scripts/phase_timers.py /tmp/phases
#   cmake -S /tmp/phases -B /tmp/phases/build -DCMAKE_BUILD_TYPE=Release \
#         -DBP_BUILD_TESTS=OFF -DBP_BUILD_EXAMPLES=OFF
#   cmake --build /tmp/phases/build -j --target bpbench
#   /tmp/phases/build/bench/bpbench pairs --scene uniform --n 100000 --frames 40 \
#         --threads 1 --backend sweep --quiet --no-fork      # prints "phases (...)"
#
# --no-fork matters: the timers print from a static destructor, and a forked
# child leaves without running it. The patch asserts on the exact source text
# it edits, so it fails loudly once the code it patches has changed.
import sys
if len(sys.argv) != 2:
    sys.exit('usage: phase_timers.py WORKTREE (a separate checkout, never the one you commit from)')
root=sys.argv[1]
open(root+'/broadphase/include/broadphase/phase_timer.h','w').write(r'''#pragma once
#include <x86intrin.h>
#include <cstdint>
#include <cstdio>
namespace bp::phase {
enum Id { check, write, close, plan, resolve, beginRest, listed, cells, finish, overflow, merge, kCount };
inline const char* names[kCount] = {"check","write","close","plan","resolve","beginRest","listed","cells","finish","overflow","merge"};
struct Acc { uint64_t t[kCount] = {}; uint64_t frames = 0; ~Acc(){ if(frames < 3) return; fprintf(stderr,"phases (k TSC/frame over %lu):", (unsigned long)frames); const double fr = double(frames - 2); uint64_t s=0; for(int i=0;i<kCount;++i){ fprintf(stderr," %s %.1f", names[i], t[i]/1000.0/fr); s+=t[i];} fprintf(stderr," | sum %.1f\n", s/1000.0/fr);} };
inline Acc acc;
inline uint64_t last = 0;
inline void mark() { last = __rdtsc(); }
inline void lap(Id id) { uint64_t n = __rdtsc(); if (acc.frames >= 2) acc.t[id] += n - last; last = n; }
}
''')
def sub(path, pairs):
    p=root+path; s=open(p).read()
    for a,b in pairs:
        assert a in s, (path, a[:60]); s=s.replace(a,b,1)
    open(p,'w').write(s)
inc=('#include <broadphase/sweep_grid.h>','#include <broadphase/sweep_grid.h>\n#include <broadphase/phase_timer.h>')
sub('/broadphase/src/sweep/sweep_grid.cpp',[inc,
 ('''  bool good = true;
  if (parallel) {''','''  bool good = true;
  phase::mark();
  if (parallel) {'''),
 ('''  // Whether update() will surely take its path''','''  phase::lap(phase::check);
  // Whether update() will surely take its path'''),
 ('''    // Close up the stretches, in chunk order.''','''    phase::lap(phase::write);
    // Close up the stretches, in chunk order.'''),
 ('''  dirtyList_.resize(relinks + added.relink);
  if (listStays)''','''  phase::lap(unique ? phase::close : phase::write);
  dirtyList_.resize(relinks + added.relink);
  if (listStays)''')])
sub('/broadphase/src/sweep/sweep_cells.cpp',[inc,
 ('''    resolveRelinks(chunks, groupInTasks);''','''    phase::lap(phase::plan);
    resolveRelinks(chunks, groupInTasks);
    phase::lap(phase::resolve);'''),
 ('''void SweepGrid::finishUpdate() {''','''void SweepGrid::finishUpdate() {
  phase::mark();'''),
 ('''  if (gridBoundsStale_) recomputeGridBounds();
}''','''  if (gridBoundsStale_) recomputeGridBounds();
  phase::lap(phase::finish);
}'''),
 ('''void SweepGrid::update(Scheduler& scheduler) {
''','''void SweepGrid::update(Scheduler& scheduler) {
  phase::mark();
''')])
sub('/broadphase/src/sweep/sweep_kernel.cpp',[inc,
 ('''  const bool pending = beginUpdate(scheduler);
  if (pending) refreshListedCells(scheduler);''','''  phase::mark();
  const bool pending = beginUpdate(scheduler);
  phase::lap(phase::beginRest);
  if (pending) refreshListedCells(scheduler);
  phase::lap(phase::listed);'''),
 ('''  if (pending) finishUpdate();
  const uint32_t overflowUnits''','''  phase::lap(phase::cells);
  if (pending) finishUpdate();
  const uint32_t overflowUnits'''),
 ('''    flush(buffer, true);
  });
}''','''    flush(buffer, true);
  });
  phase::lap(phase::overflow);
}'''),
 ('''    router_.merge(scheduler, out, sortScratch_);
    return;''','''    router_.merge(scheduler, out, sortScratch_);
    phase::lap(phase::merge); ++phase::acc.frames;
    return;'''),
 ('''  if (threads > 1) router_.remember(out, threads);''','''  if (threads > 1) router_.remember(out, threads);
  phase::lap(phase::merge); ++phase::acc.frames;''')])
print("patched")
