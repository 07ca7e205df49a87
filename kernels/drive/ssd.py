"""A flash SSD served by reservations on its internal resources (issue 3, deliverable 3).

The drive serves many commands at once (the engine starts up to its queue depth). Each
command reserves, first come first served in the order the commands start, time on:

- the **controller** (``P_CTRL_NS`` per read command, ``P_CTRL_W_NS`` per write command at
  write amplification 1, and ``wa`` times that at write amplification ``wa``: firmware
  processing and mapping, one command at a time). Every valid page garbage collection moves
  passes through the controller, as each page the host writes does: a copy inside the die
  (copy-back) cannot check the page's ECC, so controllers read the page out, correct it and
  program it again (Intel's NAND flash controller manual: "cannot do ECC validation in case of
  copy-back commands"; Samsung, US 12,664,088: the ECC of moved data is garbage collection's
  bottleneck). A drive's rated steady-state random writes thus cost the controller ``wa``
  times a fresh drive's (the catalog derives ``P_CTRL_W_NS`` from the rated figure divided
  by the write amplification at the rated over-provisioning: 13.5 us on the Intel S3700,
  2.28 us on the P3700, within 5 % of their time per read command, 13.3 and 2.17 us);
- the **host link** (``P_LINK_PS`` picoseconds per byte): a write's pages come in one after
  the other before the flash sees them, a read's pages go out as each has been read;
- the **write data path** (``P_WPATH_PS`` picoseconds per byte, 0: none): a written page,
  once in from the link, crosses the controller's write path (ECC, scrambling, mapping) into
  the buffer. Its rate is the drive's stated sustained sequential write where that is below
  what the link and the flash allow (the Intel S3700 writes 460 MB/s over a 550 MB/s link
  and 1.6 GB/s of flash programs): the firmware, not the flash, sets that figure;
- the **flash channels** (``P_CH_PS`` per byte: a page's data between controller and die).
  A read books its time on the channel and the link when it starts (in command order, so
  their bandwidth is never exceeded) and its page crosses them once read, no sooner than that
  booking ends: a read waiting on a busy plane does not hold back the commands behind it;
- the **planes** (channels x dies x planes of them): a page read takes ``P_TR_NS``, a page
  program ``P_TPROG_NS`` plus the garbage collection it causes (below).

Reads go to the plane that holds the page: logical pages are striped channel first, then die,
then plane (static mapping). A read goes ahead of the programs waiting in its plane's backlog
(the firmware serves reads first and programs buffered writes behind them): it waits only for
the operation in progress, whose end is estimated as the backlog's end less whole programs of
the plane's last program time, and pushes the backlog back by its own read time. Writes are
log-structured: pages are programmed on the planes in turn (a write pointer), as a page-mapping FTL
allocates them. A write is acknowledged once it is in the drive's buffer (power-loss-protected
DRAM, ``P_BUF_PAGES`` pages): a page enters the buffer when the page ``P_BUF_PAGES`` before it
has been programmed, so a write completes at once while the flash keeps up and at the flash's
pace when it does not.

**Garbage collection (steady state).** Under sustained random writes every page the host
writes costs ``wa`` programs on average: the page itself plus ``wa - 1`` valid pages copied out
of the blocks reclaimed (a read and a program on the plane, and the controller's time per
write above; their trips over the channel are not booked, which at these rates is not the
limit), and
``wa / pages_per_block`` block erases. The caller sets ``P_WA``: for a drive in steady state
the write amplification of greedy cleaning under uniform random writes with over-provisioning
rho = (physical - user) / user, ``(1 + rho) / (2 rho)`` (Agarwal and Marrow, "A closed-form
expression for write amplification in NAND flash", IEEE Globecom Workshops 2010); 1 for a
fresh drive. A write that continues the drive's previous write (a sequential stream) fills
whole blocks that are later invalidated whole, so it is charged no copies (amplification 1),
only its erases.

Partial pages: a request moves only its own sectors over the channel and the link; a program
of a partial page is charged in proportion (the buffer packs small writes into whole pages).
Times are integer nanoseconds.
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit
from blocklab.kernels.units import SECTOR

#: The parameter vector's fields (float64), described once, in its order: channels, dies per
#: channel, planes per die, sectors per page, page read, page program and block erase times
#: (ns), pages per block, channel and host link (ps per byte), controller time per command
#: and per write command (ns), write amplification, buffer pages, the controller's write path
#: (ps per byte; 0: no limit). Code outside kernels/ fills them by name with ``pack``.
PARAMS = ("channels", "dies", "planes", "page_sectors", "read_ns", "program_ns", "erase_ns",
          "pages_per_block", "channel_ps", "link_ps", "command_ns", "write_amplification",
          "buffer_pages", "write_command_ns", "write_path_ps")
#: Fields that may be left out, and their values then.
DEFAULTS = {"write_path_ps": 0.0}


def _p(name: str) -> int:
    return PARAMS.index(name)


P_CH = _p("channels")
P_DIES = _p("dies")
P_PLANES = _p("planes")
P_PAGE_SECT = _p("page_sectors")
P_TR_NS = _p("read_ns")
P_TPROG_NS = _p("program_ns")
P_TBERS_NS = _p("erase_ns")
P_PPB = _p("pages_per_block")
P_CH_PS = _p("channel_ps")
P_LINK_PS = _p("link_ps")
P_CTRL_NS = _p("command_ns")
P_WA = _p("write_amplification")
P_BUF_PAGES = _p("buffer_pages")
P_CTRL_W_NS = _p("write_command_ns")
P_WPATH_PS = _p("write_path_ps")
P_N = len(PARAMS)


def pack(**fields: float) -> np.ndarray:
    """The kernel's parameter vector from ``PARAMS``' fields by name; raises ValueError naming
    a field that is unknown or missing."""
    unknown = sorted(set(fields) - set(PARAMS))
    missing = [n for n in PARAMS if n not in fields and n not in DEFAULTS]
    if unknown or missing:
        raise ValueError(f"SSD parameters: unknown {unknown}, missing {missing}")
    return np.array([float(fields.get(n, DEFAULTS.get(n, 0.0))) for n in PARAMS])
# Per-drive state (int64 row): controller and link free times, write and buffer pointers, the
# end of the last write, the write path's free time, then the planes' free times, the planes'
# last program times, the channels' free times and the buffer ring.
T_CTRL, T_LINK, T_WP, T_RP, T_WEND, T_WPATH = range(6)
T_FIXED = 6


def state_width(p: np.ndarray) -> int:
    """Columns of one drive's state for parameters ``p``."""
    planes = int(p[P_CH] * p[P_DIES] * p[P_PLANES])
    return T_FIXED + 2 * planes + int(p[P_CH]) + int(p[P_BUF_PAGES])


@njit(forceinline=True, nrt=False)
def _program_ns(p, wa):
    """Plane time of one host page written at write amplification ``wa``: its program, the
    copies of valid pages garbage collection moves (read and program each), and its share of
    block erases."""
    return p[P_TPROG_NS] + (wa - 1.0) * (p[P_TR_NS] + p[P_TPROG_NS]) + wa * p[P_TBERS_NS] / \
        p[P_PPB]


@njit(nrt=False)
def service(p, st, d, now, lba, n, write):
    """Serve a command of ``n`` sectors at ``lba`` started at ``now`` (ns) on drive ``d``
    (state row ``st[d]``); returns its completion time (ns)."""
    nch = int(p[P_CH])
    nplanes = nch * int(p[P_DIES]) * int(p[P_PLANES])
    planes0 = T_FIXED
    last0 = planes0 + nplanes
    ch0 = last0 + nplanes
    ring0 = ch0 + nch
    nbuf = int(p[P_BUF_PAGES])
    ps = int(p[P_PAGE_SECT])
    wa = 1.0
    if write:  # a write that continues the last one is a sequential stream: no copies
        wa = 1.0 if lba == st[d, T_WEND] else p[P_WA]
        ctrl = int(p[P_CTRL_W_NS] * wa + 0.5)
    else:
        ctrl = int(p[P_CTRL_NS])
    t = max(now, st[d, T_CTRL]) + ctrl
    st[d, T_CTRL] = t
    done = t
    if write:
        prog = _program_ns(p, wa)
        st[d, T_WEND] = lba + n
    first = lba // ps
    last = (lba + n - 1) // ps
    link_ps = int(p[P_LINK_PS])
    wpath_ps = int(p[P_WPATH_PS])
    for page in range(first, last + 1):
        lo = max(lba, page * ps)
        hi = min(lba + n, (page + 1) * ps)
        k = hi - lo  # sectors of this page the command moves
        xfer = (k * SECTOR * int(p[P_CH_PS]) + 999) // 1000
        link = (k * SECTOR * link_ps + 999) // 1000
        if write:
            t_in = max(t, st[d, T_LINK]) + link  # the page's data comes over the link
            st[d, T_LINK] = t_in
            if wpath_ps > 0:  # and through the controller's write path
                t_in = max(t_in, st[d, T_WPATH]) + (k * SECTOR * wpath_ps + 999) // 1000
                st[d, T_WPATH] = t_in
            u = st[d, T_WP] % nplanes
            st[d, T_WP] += 1
            ch = u % nch
            c_end = max(t_in, st[d, ch0 + ch]) + xfer
            st[d, ch0 + ch] = c_end
            cost = int(prog * k / ps + 0.5)
            p_end = max(c_end, st[d, planes0 + u]) + cost
            st[d, planes0 + u] = p_end
            st[d, last0 + u] = cost
            # the page enters the buffer when the page nbuf before it has been programmed
            r = ring0 + st[d, T_RP] % nbuf
            ack = max(t_in, st[d, r])
            st[d, r] = p_end
            st[d, T_RP] += 1
            if ack > done:
                done = ack
        else:
            u = page % nplanes
            ch = u % nch
            free = st[d, planes0 + u]
            if free <= t:
                r_end = t + int(p[P_TR_NS])
                st[d, planes0 + u] = r_end
            else:  # ahead of the backlog: wait for the operation in progress only
                lp = st[d, last0 + u]
                r_end = t + ((free - t) % lp if lp > 0 else free - t) + int(p[P_TR_NS])
                st[d, planes0 + u] = free + int(p[P_TR_NS])
            # the channel and the link are booked at the command's start for their time (the
            # page cannot cross sooner than their backlog allows), and the page crosses once
            # read: a read waiting on its plane does not hold them from the commands behind
            vch = max(t, st[d, ch0 + ch]) + xfer
            st[d, ch0 + ch] = vch
            c_end = max(r_end + xfer, vch)
            vlink = max(t, st[d, T_LINK]) + link
            st[d, T_LINK] = vlink
            t_out = max(c_end + link, vlink)
            if t_out > done:
                done = t_out
    return done
