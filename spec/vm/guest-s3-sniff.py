#!/usr/bin/python3
# Runs inside the guest (spec/vm/s3-record.sh): records every frame on one
# interface, both directions, into a classic pcap (LINKTYPE_ETHERNET) until
# STOPFILE appears. AF_PACKET sees what the driver sends and receives; the
# recording script turns checksum offload, TSO, GSO and GRO off first, so the
# frames are the ones on the emulated wire. Usage: guest-s3-sniff.py IFNAME OUT STOPFILE
import os
import select
import socket
import struct
import sys
import time

ifname, out, stop = sys.argv[1:4]
ETH_P_ALL = 3
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
s.bind((ifname, 0))
with open(out, 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    f.flush()
    open(out + '.ready', 'w').close()
    while not os.path.exists(stop):
        r, _, _ = select.select([s], [], [], 0.1)
        if not r:
            continue
        data = s.recv(65535)
        t = time.time()
        f.write(struct.pack('<IIII', int(t), int((t % 1) * 1e6), len(data), len(data)))
        f.write(data)
