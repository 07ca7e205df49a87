"""Byte-level parsers of the event text formats: blkparse's default output and the kernel's
tracefs text of the block tracepoints. Both fill the pairing event matrix.

Every parser takes a buffer of whole lines and a start position, and returns
(events written, next position, status, status position, last time, first time, checked). On a
bad line it stops with the line's start as status position, so the caller can name the line
and, with ``--skip-bad``, resume after it. The first time is that of the first line whose time
it checked against the ``last_time`` it was given, and ``checked`` says whether there was one: a
parse started before the previous chunk's last time was known, with ``last_time`` ``NO_TIME``,
is the one a serial parse gives exactly when it checked a time and that first time is at least
the previous chunk's last (traces/formats/textevents.py).
"""

from __future__ import annotations

from ._jit import njit
from .bytescan import NL, is_digit, line_end, parse_fixed, parse_uint, skip_spaces, token_end
from .pairing import put_event

OK = 0
BAD_LINE = 1  # not the expected shape
BAD_ACTION = 2  # unknown action letter / event
SUMMARY = 3  # blkparse's closing summary begins here: no events after it
BACKWARDS = 4
BAD_SIZE = 5

OP_READ, OP_WRITE, OP_DISCARD, OP_FLUSH, OP_OTHER = 0, 1, 2, 3, 4
FL_SYNC, FL_FUA, FL_META, FL_RAHEAD, FL_PREFLUSH = 1, 2, 4, 8, 16

MAX_SECTORS = 1 << 31
#: The last time a parse starts from when there is none yet (no line is before it).
NO_TIME = -(1 << 63)


@njit(forceinline=True, nrt=False)
def rwbs(buf, i, j):
    """Op and flags from an RWBS string such as ``WS``, ``FWFS``, ``RA``, ``FF``, ``D``.

    A leading F followed by an op letter is a preflush; the op letter is W, R, D (discard,
    E for secure erase may follow), F (a flush on its own), N (none: other commands) or, on
    kernels with zoned devices, Z and its zone operation: ZA (zone append, a write), ZR, ZRA,
    ZF, ZO, ZC (reset, reset all, finish, open, close: other). Flags: F (FUA), A (readahead),
    S (sync), M (meta), U (atomic write, accepted and not kept). Returns (op, flags, ok).
    """
    op = -1
    flags = 0
    k = i
    if k < j and buf[k] == 70 and k + 1 < j and buf[k + 1] in (87, 82, 68, 70, 78, 90):  # F+op
        flags |= FL_PREFLUSH
        k += 1
    if k >= j:
        return 0, 0, False
    c = buf[k]
    if c == 87:  # W
        op = OP_WRITE
    elif c == 82:  # R
        op = OP_READ
    elif c == 68:  # D
        op = OP_DISCARD
        if k + 1 < j and buf[k + 1] == 69:  # E: secure erase
            k += 1
    elif c == 70:  # F
        op = OP_FLUSH
    elif c == 78:  # N
        op = OP_OTHER
    elif c == 90:  # Z: a zone operation
        if k + 1 >= j:
            return 0, 0, False
        z = buf[k + 1]
        if z == 65:  # ZA: zone append
            op = OP_WRITE
        elif z == 82 or z == 70 or z == 79 or z == 67:  # ZR(A), ZF, ZO, ZC
            op = OP_OTHER
            if z == 82 and k + 2 < j and buf[k + 2] == 65:  # ZRA: reset all
                k += 1
        else:
            return 0, 0, False
        k += 1
    else:
        return 0, 0, False
    k += 1
    while k < j:
        c = buf[k]
        if c == 70:
            flags |= FL_FUA
        elif c == 65:
            flags |= FL_RAHEAD
        elif c == 83:
            flags |= FL_SYNC
        elif c == 77:
            flags |= FL_META
        elif c == 85:  # U: REQ_ATOMIC
            pass
        else:
            return 0, 0, False
        k += 1
    return op, flags, True


@njit(forceinline=True, nrt=False)
def _dev(buf, i, end):
    """``maj,min`` -> (dev_t, next)."""
    maj, i = parse_uint(buf, i, end)
    if i < 0 or i >= end or buf[i] != 44:
        return 0, -1
    mnr, i = parse_uint(buf, i + 1, end)
    if i < 0:
        return 0, -1
    return (maj << 20) | mnr, i


@njit(forceinline=True, nrt=False)
def _blkparse_action(buf, i, j):
    n = j - i
    c = buf[i]
    if n == 2:
        if c == 85 and buf[i + 1] == 84:  # UT
            return 11
        return -1
    if n != 1:
        return -1
    if c == 81:
        return 1  # Q
    if c == 77:
        return 2  # M
    if c == 70:
        return 3  # F
    if c == 71:
        return 4  # G
    if c == 83:
        return 5  # S
    if c == 82:
        return 6  # R
    if c == 68:
        return 7  # D
    if c == 67:
        return 8  # C
    if c == 80:
        return 9  # P
    if c == 85:
        return 10  # U
    if c == 73:
        return 12  # I
    if c == 88:
        return 13  # X
    if c == 66:
        return 14  # B
    if c == 65:
        return 15  # A
    if c == 84:
        return 16  # T (abort)
    if c == 109 or c == 78:
        return 0  # m: message notify, N: driver data (no request)
    return -1


@njit(forceinline=True, nrt=False)
def _bracket(buf, i, end):
    """Position of '[' at or after ``i`` and of the matching last ']' on the line."""
    a = i
    while a < end and buf[a] != 91:
        a += 1
    b = end - 1
    while b > a and buf[b] != 93:
        b -= 1
    return a, b


@njit(nrt=False)
def parse_blkparse(buf, pos, events, comms, last_time):
    """Parse blkparse default-format lines.

    ``events`` is the flattened event matrix; ``comms[2k], comms[2k+1]`` are the start and end
    of the ``[process]`` text of event k, or -1.
    Returns (events, next position, status, status position, last time, first time, checked).

    One pass over a line: its fields are read up to the size (every helper stops at a
    newline), and only the rest (the process name, a remap's source) is scanned for the
    line's end. Finding each line's end first, then reading its fields, read every byte twice:
    that first scan was a third of the parse (measured on the bench's text).
    """
    n = len(buf)
    ne = 0
    first = NO_TIME
    checked = False  # (a line's time may be NO_TIME itself: a flag, not the sentinel)
    while pos < n:
        start = pos
        i = skip_spaces(buf, start, n)
        if i >= n or buf[i] == NL:
            pos = i + 1
            continue
        dev, i = _dev(buf, i, n)
        if i < 0:
            # blkparse ends its output with per-CPU and total summaries
            end = line_end(buf, start, n)
            k = skip_spaces(buf, start, end)
            if k + 3 <= end and buf[k] == 67 and buf[k + 1] == 80 and buf[k + 2] == 85:
                return ne, start, SUMMARY, start, last_time, first, checked
            if k + 5 <= end and buf[k] == 84 and buf[k + 1] == 111 and buf[k + 2] == 116:
                return ne, start, SUMMARY, start, last_time, first, checked
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, i, n)
        _cpu, i = parse_uint(buf, i, n)
        if i < 0:
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, i, n)
        _seq, i = parse_uint(buf, i, n)
        if i < 0:
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, i, n)
        t, i = parse_fixed(buf, i, n, 9)
        if i < 0:
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, i, n)
        pid, i = parse_uint(buf, i, n)
        if i < 0:
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, i, n)
        j = token_end(buf, i, n)
        if j == i:
            return ne, start, BAD_LINE, start, last_time, first, checked
        act = _blkparse_action(buf, i, j)
        if act < 0:
            return ne, start, BAD_ACTION, start, last_time, first, checked
        if act == 0:
            pos = line_end(buf, j, n) + 1
            continue
        i = skip_spaces(buf, j, n)
        j = token_end(buf, i, n)
        op, flags, ok = rwbs(buf, i, j)
        if not ok:
            return ne, start, BAD_LINE, start, last_time, first, checked
        if t < last_time:
            return ne, start, BACKWARDS, start, last_time, first, checked
        if not checked:
            checked = True
            first = t
        last_time = t
        i = skip_spaces(buf, j, n)
        sector, nsec, aux, i, end, st = _blkparse_place(buf, i, n, act)
        if st == _SKIP:
            pos = end + 1
            continue
        if st != OK:
            return ne, start, st, start, last_time, first, checked
        pos = end + 1
        err, cs, ce = _blkparse_name(buf, i, end, act)
        op, flags = _empty_flush(op, flags, nsec, act)
        _put(events, comms, ne, t, dev, act, op, flags, sector, nsec << 9, pid, err, aux, cs, ce)
        ne += 1
    return ne, pos, OK, pos, last_time, first, checked


#: ``_blkparse_place``'s status of a passthrough command's line (no event; never returned).
_SKIP = -1


@njit(forceinline=True, nrt=False)
def _blkparse_place(buf, i, n, act):
    """The fields of a blkparse line after its RWBS, from ``i``, up to its process name:
    (sector, sectors, aux (a split's or remap's other sector, -1), position after them, the
    line's end, status OK, BAD_LINE, BAD_SIZE or ``_SKIP``)."""
    sector = 0
    nsec = 0
    aux = -1
    if i < n and is_digit(buf[i]):
        sector, i = parse_uint(buf, i, n)
        i = skip_spaces(buf, i, n)
        if i < n and buf[i] == 40 and act != 8 and act != 6:
            # "bytes (cdb) [comm]": a passthrough command (a completion or requeue of one
            # prints no number before its "(cdb)")
            return 0, 0, -1, i, line_end(buf, i, n), _SKIP
        if i < n and (buf[i] == 91 or buf[i] == 40):
            # "sector [error]", or with blkparse -t "sector (elapsed) [error]": a
            # completion without a length (a flush)
            pass
        elif i >= n or (buf[i] != 43 and buf[i] != 47):
            return 0, 0, -1, i, i, BAD_LINE
        else:
            sep = buf[i]
            i = skip_spaces(buf, i + 1, n)
            val, i = parse_uint(buf, i, n)
            if i < 0:
                return 0, 0, -1, i, i, BAD_LINE
            if sep == 47:  # split: "sector / new_sector"
                aux = val
            else:
                nsec = val
                if nsec > MAX_SECTORS:
                    return 0, 0, -1, i, i, BAD_SIZE
            i = skip_spaces(buf, i, n)
        end = line_end(buf, i, n)  # (the fields so far stopped at the newline, if before)
        if act == 15 and i + 1 < end and buf[i] == 60:  # remap: "<- (maj,min) from"
            k = i
            while k < end and buf[k] != 41:
                k += 1
            k = skip_spaces(buf, k + 1, end)
            aux, _k = parse_uint(buf, k, end)
        return sector, nsec, aux, i, end, OK
    # no sector: "[comm]" (plug, unplug, an empty request), "(elapsed) [comm]" (blkparse -t)
    # or "(cdb) [error]" (a passthrough's completion); anything else is not blkparse's
    # (blkparse_fmt.c process_default), such as a sector that is not a number, which was
    # taken for none
    if i < n and buf[i] != 91 and buf[i] != 40 and buf[i] != NL:
        return 0, 0, -1, i, i, BAD_LINE
    return sector, nsec, aux, i, line_end(buf, i, n), OK


@njit(forceinline=True, nrt=False)
def _blkparse_name(buf, i, end, act):
    """The bracket after a blkparse line's fields: a completion's or requeue's error, else
    the process name's span. Returns (error, name start, name end; -1, -1 for none)."""
    a, b = _bracket(buf, i, end)
    err = 0
    cs = -1
    ce = -1
    if a < end and b > a:
        if act == 8 or act == 6:
            v, k = parse_uint(buf, a + 1 + (1 if buf[a + 1] == 45 else 0), b)
            if k > 0:
                err = -v if buf[a + 1] == 45 else v
                if err >= 32768:
                    err -= 65536  # blkparse prints the u16 error field unsigned
        else:
            cs = a + 1
            ce = b
    return err, cs, ce


@njit(forceinline=True, nrt=False)
def _put(events, comms, ne, t, dev, act, op, flags, sector, nbytes, pid, err, aux, cs, ce):
    """Event ``ne`` into the flattened event matrix, its process-name span into ``comms``."""
    put_event(events, ne, t, dev, act, op, flags, sector, nbytes, pid, err, aux)
    comms[2 * ne] = cs
    comms[2 * ne + 1] = ce


@njit(forceinline=True, nrt=False)
def _empty_flush(op, flags, nsec, act):
    """A preflush with no data is a flush request ("FW 0 + 0"); an empty read is no read."""
    if nsec == 0 and act != 13:
        if (flags & FL_PREFLUSH) != 0 or op == OP_FLUSH:
            return OP_FLUSH, flags & ~FL_PREFLUSH
        if op == OP_READ:
            return OP_OTHER, flags
    return op, flags


# tracefs event names -> actions
@njit(nrt=False)
def _tracefs_event(buf, i, j):
    """Action code of a ``block_*`` event name in buf[i:j] (without the colon); 0 to ignore,
    -1 when it is not a block event."""
    if j - i < 7 or not (buf[i] == 98 and buf[i + 1] == 108 and buf[i + 5] == 95):  # "bl..._"
        return -1
    k = i + 6
    m = j - k
    # compare against the names we pair
    if m == 9 and buf[k] == 114 and buf[k + 3] == 105 and buf[k + 8] == 116:  # rq_insert
        return 12
    if m == 8 and buf[k] == 114 and buf[k + 3] == 105 and buf[k + 7] == 101:  # rq_issue
        return 7
    if m == 11 and buf[k] == 114 and buf[k + 3] == 99:  # rq_complete
        return 8
    if m == 10 and buf[k] == 114 and buf[k + 3] == 114:  # rq_requeue
        return 6
    if m == 9 and buf[k] == 98 and buf[k + 4] == 113:  # bio_queue
        return 1
    if m == 13 and buf[k] == 98 and buf[k + 4] == 98 and buf[k + 5] == 97:  # bio_backmerge
        return 2
    if m == 14 and buf[k] == 98 and buf[k + 4] == 102:  # bio_frontmerge
        return 3
    if m == 5 and buf[k] == 103:  # getrq
        return 4
    if m == 5 and buf[k] == 115 and buf[k + 1] == 112:  # split
        return 13
    if m == 9 and buf[k] == 98 and buf[k + 4] == 114:  # bio_remap
        return 15
    return 0


@njit(forceinline=True, nrt=False)
def _tracefs_task(buf, i, end):
    """The ``task-pid [cpu]`` head of a tracefs line from ``i``: (pid, task start, task end,
    position of '[cpu]'); the position is ``end`` when the line has no ``[digits]``. The pid
    is the digits before '[' (skipping blanks and an optional "(tgid)"), 0 when absent."""
    b = i
    while b < end:
        if buf[b] == 91 and b + 1 < end and is_digit(buf[b + 1]):
            k = b + 1
            while k < end and is_digit(buf[k]):
                k += 1
            if k < end and buf[k] == 93:
                break
        b += 1
    if b >= end:
        return 0, i, i, end
    k = b - 1
    while k > i and buf[k] == 32:
        k -= 1
    if buf[k] == 41:  # ')'
        while k > i and buf[k] != 40:
            k -= 1
        k -= 1
        while k > i and buf[k] == 32:
            k -= 1
    pe = k + 1
    while k > i and is_digit(buf[k]):
        k -= 1
    pid = 0
    if buf[k] == 45:  # '-'
        pid, _x = parse_uint(buf, k + 1, pe)
    return pid, i, k, b


@njit(forceinline=True, nrt=False)
def _tracefs_time(buf, b, end):
    """The time stamp after ``[cpu]`` at ``b`` (optional irq-info flags, then
    "seconds.fraction:"): (ns, position after the colon), the position -1 when malformed."""
    i = b
    while i < end and buf[i] != 93:
        i += 1
    i = skip_spaces(buf, i + 1, end)
    j = token_end(buf, i, end)
    if j > i and buf[j - 1] != 58:  # irq-info flags column
        i = skip_spaces(buf, j, end)
        j = token_end(buf, i, end)
    if j <= i or buf[j - 1] != 58:
        return 0, -1
    t, k = parse_fixed(buf, i, j - 1, 9)
    if k != j - 1:
        return 0, -1
    return t, j


@njit(forceinline=True, nrt=False)
def _tracefs_lost(buf, i, end):
    """The count M of a ``CPU:N [LOST M EVENTS]`` line (0 when it has none)."""
    k = i
    while k < end and buf[k] != 76:  # 'L'
        k += 1
    k = skip_spaces(buf, k + 4, end)
    m, k = parse_uint(buf, k, end)
    return m if k > 0 else 0


@njit(nrt=False)
def parse_tracefs(buf, pos, events, comms, last_time, lost):
    """Parse tracefs text lines (``trace`` or ``trace_pipe``) of the block tracepoints.

    ``lost[0]`` accumulates ``CPU:N [LOST M EVENTS]`` counts. ``comms[2k], comms[2k+1]`` span
    the ``[comm]`` of an insert/issue/queue event, else the task column's name.
    """
    n = len(buf)
    ne = 0
    first = NO_TIME
    checked = False  # (a line's time may be NO_TIME itself: a flag, not the sentinel)
    while pos < n:
        start = pos
        end = line_end(buf, pos, n)
        pos = end + 1
        i = skip_spaces(buf, start, end)
        if i >= end or buf[i] == 35:  # blank or '#' comment
            continue
        if end - i > 4 and buf[i] == 67 and buf[i + 1] == 80 and buf[i + 2] == 85 \
                and buf[i + 3] == 58:
            lost[0] += _tracefs_lost(buf, i, end)  # "CPU:N [LOST M EVENTS]"
            continue
        pid, task_s, task_e, b = _tracefs_task(buf, i, end)
        if b >= end:
            return ne, start, BAD_LINE, start, last_time, first, checked
        t, j = _tracefs_time(buf, b, end)
        if j < 0:
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, j, end)
        j = token_end(buf, i, end)
        if j <= i or buf[j - 1] != 58:
            return ne, start, BAD_LINE, start, last_time, first, checked
        act = _tracefs_event(buf, i, j - 1)
        if act <= 0:
            continue  # another subsystem's event, or a block event we do not pair
        i = skip_spaces(buf, j, end)
        dev, i = _dev(buf, i, end)
        if i < 0:
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, i, end)
        j = token_end(buf, i, end)
        op, flags, ok = rwbs(buf, i, j)
        if not ok:
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, j, end)
        if i < end and is_digit(buf[i]) and act != 1 and act != 2 and act != 3 and act != 4 \
                and act != 13 and act != 15:
            _bytes, i = parse_uint(buf, i, end)  # rq events: total bytes (also of passthrough)
            i = skip_spaces(buf, i, end)
        if i < end and buf[i] == 40:  # "(cmd)"
            while i < end and buf[i] != 41:
                i += 1
            i = skip_spaces(buf, i + 1, end)
        sector, i = parse_uint(buf, i, end)
        if i < 0:
            return ne, start, BAD_LINE, start, last_time, first, checked
        i = skip_spaces(buf, i, end)
        if i >= end or (buf[i] != 43 and buf[i] != 47):
            return ne, start, BAD_LINE, start, last_time, first, checked
        sep = buf[i]
        i = skip_spaces(buf, i + 1, end)
        val, i = parse_uint(buf, i, end)
        if i < 0:
            return ne, start, BAD_LINE, start, last_time, first, checked
        nsec = 0
        aux = -1
        if sep == 47:
            aux = val
        else:
            nsec = val
        if nsec > MAX_SECTORS:
            return ne, start, BAD_SIZE, start, last_time, first, checked
        if act == 15:  # "<- (maj,min) from_sector"
            k = i
            while k < end and buf[k] != 41:
                k += 1
            aux, _k = parse_uint(buf, skip_spaces(buf, k + 1, end), end)
        if t < last_time:
            return ne, start, BACKWARDS, start, last_time, first, checked
        if not checked:
            checked = True
            first = t
        last_time = t
        a, bb = _bracket(buf, i, end)
        cs = task_s
        ce = task_e
        err = 0
        if a < end and bb > a:
            if act == 8 or act == 6:
                neg = buf[a + 1] == 45
                v, k = parse_uint(buf, a + 1 + (1 if neg else 0), bb)
                if k > 0:
                    err = -v if neg else v
            else:
                cs = a + 1
                ce = bb
        op, flags = _empty_flush(op, flags, nsec, act)
        _put(events, comms, ne, t, dev, act, op, flags, sector, nsec << 9, pid, err, aux, cs, ce)
        ne += 1
    return ne, pos, OK, pos, last_time, first, checked
