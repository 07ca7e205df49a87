"""The replay engine (issue 3, deliverable 4): an event-driven kernel that replays host requests
against an array of drives and reports when each request started and completed.

Front door (``door.py``): ``Settings`` (one replay's settings, each default stated once),
``Streams`` (closed loop), ``Engine`` (``new_state``, ``load``, ``retire``, ``run``; statistics,
records and events by name) and ``tables`` (every table's columns and codes described once, with
the structured dtypes the pipeline builds the array's and the failure plan's tables in). The
kernels, by seam: ``loop.py`` (the event loop ``replay`` and the ring's load and retire kernels),
``requests.py`` (a host request's planning and way through controller and links; closed-loop
streams), ``cachepath.py`` (the controller cache: lookups, prefetch, write-back, destage),
``drives.py`` (queues, schedulers, service through the drive models, statistics bins) and
``tasks.py`` (failures, rebuild, rebalance and initialization tasks, run events).

The front door (``door.py`` Engine) streams the trace through a ring of request slots: it loads
rows, calls ``replay``, and the kernel returns when it needs more rows (``NEED_INPUT``), more
operation slots, heap entries or record space (``FULL_*``: the caller grows or drains them and
calls again) or when every request has completed (``DONE``). Requests are named by their
*global index* (0, 1, 2, ... over the read and write requests of the trace) everywhere in the
kernel; a request's slot is ``index & (capacity - 1)``. The caller retires completed requests in
order and reuses their slots, so memory stays bounded whatever the trace length. Background
work (cache destage and prefetch) is done by *jobs*; an operation belongs to request g >= 0 or
to job j, written -(j + 1).

Semantics (``tests/reference/engine.py`` implements the same in plain Python):

1. **Arrivals.** Open loop: request k arrives at ``arrive[k]`` (the trace time divided by the
   speed factor; non-decreasing). Closed loop: each stream keeps ``outst`` requests in flight
   and issues them in its own order; request k is issued at ``max(t + think[k], arrive[k])``
   where t is the completion that freed its slot (or the start of its phase). Phases are
   barriers: phase p+1 starts when every request of phases <= p has completed. Closed-loop
   arrivals at the same time are taken in request order. *Repetition* (``max_passes`` > 1):
   when the last phase of a pass completes while background tasks remain (started or not)
   and fewer than ``max_passes`` passes have run, the trace runs again from its first phase;
   the new pass's requests follow the previous pass's in the global index, and their
   ``arrive`` counts from the time the pass started.
2. **Controller.** With a per-command time ``ctrl_ns`` the controller takes commands one at a
   time, first come first served. Write data then crosses the host links (one first-come
   first-served server, ``path_ps`` picoseconds per byte); read data crosses them on its way
   out. Every drive operation's data crosses the internal bus (``bus_ps``), a server
   reserved first come first served when the operation starts: the operation completes when
   both the drive and its bus transfer are done. (A write that a drive with command queuing
   took its data for while still queued, ``hdd.service_queued``, is still put on the bus when
   it starts: the bus is a bound on the drives' data rate, not a schedule of when each byte
   moves.)
3. **Controller cache** (``cache_lines`` > 0; ``kernels/cache.py``). A request is cut into
   pieces per LUN (below) and each piece into cache lines of ``line_sectors``.
   *Reads*: when every sector is valid in the cache the read is a hit and its data goes out at
   once; when some needed line is being filled by a prefetch and none is missing the read
   waits on that line's LUN and is looked up again (an event of its own, at that time) when a
   prefetch of that LUN completes;
   otherwise the whole read goes to the drives and its data then fills the cache (clean lines,
   taking free or least recently used clean lines while there are any). A read is
   *sequential* on a LUN when a piece starts where the LUN's previous read piece ended; with
   read-ahead (``ra_sectors``) a sequential read keeps the LUN's prefetch up to ``ra_sectors``
   ahead of its end: prefetch jobs read ``ra_sectors`` at a time into the lines they lack,
   taken from free lines, then from the least recently used clean lines outside the
   prefetch's own range (its cached lines stay); a prefetch is skipped when too few such
   lines or no job are available.
   *Writes, write-back*: once the data is in, lines are taken for the sectors not cached and
   every written sector is marked valid and dirty: the write completes (a cache hit). When too
   few lines are free or clean (not counting the write's own), writes wait, in order, until a
   destage or prefetch completes and there is room; a write spanning more lines than the cache
   has goes to the drives. *Write-through* (and no cache): the write goes to the drives, and
   then updates the cache as clean data.
   *Destage*: when the dirty lines reach ``flush_start`` the controller destages until they
   are at most ``flush_stop``; the oldest dirty line is also destaged once it is
   ``flush_age_ns`` old. At most ``destage_depth`` destage jobs run at once; each takes the
   oldest dirty line with the dirty lines next to it within its window of whole RAID stripes
   (as many as fit in 4 MiB, at least one) and writes their dirty extent through the layout
   (full stripes need no reads). A timer event wakes the
   controller when the oldest dirty data comes of age.
4. **Planning.** A request is cut at the host volume's stripe-unit boundaries into pieces, one
   per LUN; each LUN's layout (``kernels.layout.raid``) turns a piece into drive operations in
   two phases (reads a parity update needs, then the rest); a mirror reads each piece from the
   copy whose last operation ended nearest it, as Linux md does (raid.py; the heads per member
   map are ``MH``). Operations of one request on the
   same drive, in the same phase and direction, that are contiguous on the drive are merged
   into one (a controller issues one command per drive for contiguous segments). Phase-0
   operations are queued at once and phase-1 ones when the last phase-0 one completes (or at
   once if there are none), each phase in planning order.
5. **Drives.** Each drive has a queue (first come, first served order) and serves up to
   ``maxinf`` operations at once (1 for a disk, its queue depth for an SSD); when it may start
   one, its scheduler picks among the first ``depth`` queued: FCFS the oldest, SSTF the one
   nearest the end of the last operation started, C-LOOK the lowest sector at or past it, else
   the lowest, SPTF (an HDD's) the one whose first block its head reaches soonest (the HDD
   model's ``position_ms``; on a drive without a mechanism, FCFS) (ties: the oldest); but
   when the oldest queued operation has waited at least the drive's ``max_wait`` (aging; 0: no
   limit), it goes first. Service times come from the
   drive's model (``MODEL_*``). After every event, drives that can start do so in drive order.
6. **Completion.** A read completes when its data has crossed the data path; a write when its
   last drive operation completes (or its data is in a write-back cache). A request of no
   sectors has no drive operations, but otherwise goes the same way: it takes its turn at the
   controller; a write, and a read when there is a cache (which finds every one of its no
   sectors), also on the host links, carrying nothing; and a write to a write-back cache waits
   behind the writes already waiting for room. Then, in closed loop, its stream issues its
   next request. The replay ends when every host request has completed and (with ``drain``)
   every task has ended, whatever cache work is still under way.
7. **Order.** Events are ordered by (time, kind, sequence number); at equal times drive
   completions come first, then reads looking the cache up again, data transfers, controller
   completions, cache timers, failures, task starts and rate tokens, arrivals, and cache jobs
   with no drive operation (point 8); an open-loop arrival from the trace comes after every
   other scheduled event of its time and before those jobs.
8. **Failures** (issue 5). A LUN is made of extents, each a range of a member map (a RAID
   group, a storage pool's private group, a pool's D-stripe) whose members are drives at an
   offset. At a failure, every member the drive was becomes missing (``raid.py`` plans around
   missing members); when a map has lost more members than its layout tolerates, the stripes
   beyond the tolerance's rebuild cursor are lost (a ``data_loss`` event counts them). A host
   request with part of its data lost (``raid.request_lost``) is marked, whether the drives or
   the controller's cache serve it: its hit output gains ``HIT_LOST`` (tables.py). A destage
   or prefetch with no operation left (its data all on failed members) is done at once, an
   ``HK_JOB`` event. Operations already queued on the failed drive complete as planned.
9. **Tasks**: a rebuild, a rebalance or a parity initialization works through its pieces in
   units (unit u: piece u mod pieces, u div pieces within it), keeping ``depth`` units in
   flight, no faster than its rate cap. At a rebuild's start each missing member maps to its
   replacement and is missing above a cursor that follows the units completed in order; a
   rebalance switches a member to its new drive when the piece is copied. Task operations wait
   in the drive's background queue: a drive serves its host queue first, but when both hold
   work, background work gets its task's share of the drive's time: it goes first while its
   credit is positive; an operation picked while both wait adds share / (1 - share) of its
   service time to the credit (host work) or takes its service time off (background work);
   share 1 always goes first. Events: failure, data loss, start, progress every tenth, end,
   replacement.

Per-drive statistics are kept in time bins of ``S[S_INTERVAL]`` ns: busy time, operations and
bytes started, and the integral of the operations at the drive (queued or in service); when
time outgrows the bins, adjacent bins merge and the interval doubles.
"""

from . import tables
from .door import Engine, Settings, Streams

__all__ = ["Engine", "Settings", "Streams", "tables"]
