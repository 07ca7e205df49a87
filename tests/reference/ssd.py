"""Plain-Python reference of the SSD model (kernels/drive/ssd.py module docstring): per-drive
free times of the controller, the host link, every channel and every plane, a write pointer
over the planes, the controller's write path (a server after the link), the write buffer as a
FIFO of program completion times, garbage collection charged per page written, and reads that
go ahead of a plane's waiting programs."""

from __future__ import annotations

import math
from collections import deque


class Ssd:
    def __init__(self, channels, dies, planes, page_sectors, read_ns, program_ns, erase_ns,
                 pages_per_block, channel_ps, link_ps, command_ns, wa, buffer_pages,
                 write_command_ns=None, write_path_ps=0):
        self.nch = channels
        self.nplanes = channels * dies * planes
        self.ps = page_sectors
        self.tr, self.tprog, self.tbers = read_ns, program_ns, erase_ns
        self.ppb = pages_per_block
        self.ch_ps, self.link_ps, self.cmd = channel_ps, link_ps, command_ns
        self.wcmd = command_ns if write_command_ns is None else write_command_ns
        self.wa = wa
        self.wpath_ps = write_path_ps
        self.ctrl = 0
        self.link = 0
        self.wpath = 0  # when the controller's write path is free
        self.channel = [0] * channels
        self.plane = [0] * self.nplanes  # end of each plane's backlog
        self.last_prog = [0] * self.nplanes  # plane time of its last program
        self.next_plane = 0
        self.last_write_end = 0
        self.buffer = deque([0] * buffer_pages)  # program ends of the last pages buffered

    def serve(self, now, lba, n, write):
        # a write at write amplification wa costs the controller wa times a fresh write: the
        # pages garbage collection moves go through it too (a sequential stream moves none)
        wa = 1.0 if write and lba == self.last_write_end else self.wa
        self.ctrl = max(now, self.ctrl) + (int(self.wcmd * wa + 0.5) if write else self.cmd)
        t = done = self.ctrl
        if write:
            prog = self.tprog + (wa - 1) * (self.tr + self.tprog) + wa * self.tbers / self.ppb
            self.last_write_end = lba + n
        for page in range(lba // self.ps, (lba + n - 1) // self.ps + 1):
            k = min(lba + n, (page + 1) * self.ps) - max(lba, page * self.ps)
            ch_time = math.ceil(k * 512 * self.ch_ps / 1000)
            link_time = math.ceil(k * 512 * self.link_ps / 1000)
            if write:
                self.link = max(t, self.link) + link_time
                data_in = self.link
                if self.wpath_ps:  # the write path after the link
                    self.wpath = max(self.link, self.wpath) + math.ceil(
                        k * 512 * self.wpath_ps / 1000)
                    data_in = self.wpath
                u = self.next_plane % self.nplanes
                self.next_plane += 1
                c = u % self.nch
                self.channel[c] = max(data_in, self.channel[c]) + ch_time
                cost = int(prog * k / self.ps + 0.5)
                self.plane[u] = max(self.channel[c], self.plane[u]) + cost
                self.last_prog[u] = cost
                done = max(done, data_in, self.buffer.popleft())
                self.buffer.append(self.plane[u])
            else:
                u = page % self.nplanes
                c = u % self.nch
                if self.plane[u] <= t:  # idle plane
                    read_end = t + self.tr
                    self.plane[u] = read_end
                else:  # the read goes first; only the operation in progress finishes
                    busy = self.plane[u] - t
                    lp = self.last_prog[u]
                    read_end = t + (busy % lp if lp else busy) + self.tr
                    self.plane[u] += self.tr
                self.channel[c] = max(t, self.channel[c]) + ch_time  # booked at the start
                crossed = max(read_end + ch_time, self.channel[c])
                self.link = max(t, self.link) + link_time
                done = max(done, crossed + link_time, self.link)
        return done
