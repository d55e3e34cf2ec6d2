#!/usr/bin/python3
# Runs inside the guest (spec/vm/p4.sh): an RC QP pair on one ionic device
# whose server runs fixtures/p4/rdma_fp8.json with rdma_fp8.commands.txt.
# An RDMA WRITE of 256 E4M3 codes into a buffer of 256 others must leave the
# E4M3 sums there (the program turned the WRITE into an fp8 add), checked
# against a table this script computes itself (each code's value from its bit
# fields; nearest code by exhaustive search, ties to the even code; 448 + 448
# is NaN without saturation). Then a 3-byte WRITE, which the table drops,
# must complete with IBV_WC_RETRY_EXC_ERR and write nothing.
# Usage: guest-p4-fp8.py IBDEV
import sys
import time

from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
import pyverbs.libibverbs_enums as e

fail = 0


def check(what, ok, detail=''):
    global fail
    print(('ok   - ' if ok else 'FAIL - ') + what + (f' ({detail})' if detail and not ok else ''), flush=True)
    if not ok:
        fail = 1


def en(name):
    # Newer pyverbs keep enums in IntEnum classes (ibv_qp_type, ...), older ones at module level.
    if hasattr(e, name):
        return int(getattr(e, name))
    for k in dir(e):
        c = getattr(e, k)
        if isinstance(c, type) and hasattr(c, name):
            return int(getattr(c, name))
    raise KeyError(name)


def e4m3(c):
    s = -1.0 if c & 0x80 else 1.0
    ex = (c >> 3) & 15
    m = c & 7
    if ex == 15 and m == 7:
        return float('nan')
    if ex == 0:
        return s * (m / 8.0) * 2.0 ** -6
    return s * (1 + m / 8.0) * 2.0 ** (ex - 7)


def encode_e4m3(v):
    """Nearest E4M3 code, ties to the even code; past 464 (halfway to the absent 480) NaN (0x7f)."""
    if v != v:
        return 0x7f
    sign = 0x80 if (v < 0 or (v == 0 and str(v).startswith('-'))) else 0
    a = abs(v)
    best, bd = None, None
    for c in range(0x7f + 1):  # 0x7f stands for the first value past the max (480): overflow
        val = 480.0 if c == 0x7f else e4m3(c)
        d = abs(val - a)
        if bd is None or d < bd or (d == bd and c % 2 == 0):
            best, bd = c, d
    return sign | best  # best == 0x7f: overflow, NaN with the sign (0x7f or 0xff)


dev = sys.argv[1]
ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 16, None, None, 0)
rw = en('IBV_ACCESS_LOCAL_WRITE') | en('IBV_ACCESS_REMOTE_WRITE') | en('IBV_ACCESS_REMOTE_READ')
src = MR(pd, 4096, rw)
dst = MR(pd, 4096, rw)
cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
qa = QP(pd, QPInitAttr(qp_type=en('IBV_QPT_RC'), scq=cq, rcq=cq, cap=cap))
qb = QP(pd, QPInitAttr(qp_type=en('IBV_QPT_RC'), scq=cq, rcq=cq, cap=cap))
gid = ctx.query_gid(1, 0)


def connect(qp, dest):
    attr = QPAttr()
    attr.qp_state = en('IBV_QPS_INIT')
    attr.port_num = 1
    attr.pkey_index = 0
    attr.qp_access_flags = rw
    attr.path_mtu = en('IBV_MTU_1024')
    attr.dest_qp_num = dest.qp_num
    attr.rq_psn = 0
    attr.sq_psn = 0
    attr.max_dest_rd_atomic = 1
    attr.max_rd_atomic = 1
    attr.min_rnr_timer = 12
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    attr.ah_attr = AHAttr(is_global=1, port_num=1, gr=GlobalRoute(dgid=gid, sgid_index=0, hop_limit=64))
    qp.to_rts(attr)


connect(qa, qb)
connect(qb, qa)
print(f'{dev}: QPs {qa.qp_num} <-> {qb.qp_num}, dst rkey {dst.rkey:#x}, gid {gid}', flush=True)


def write(length, wr_id):
    wr = SendWR(wr_id=wr_id, opcode=en('IBV_WR_RDMA_WRITE'), num_sge=1, sg=[SGE(src.buf, length, src.lkey)],
                send_flags=en('IBV_SEND_SIGNALED'))
    wr.set_wr_rdma(dst.rkey, dst.buf)
    qa.post_send(wr, None)
    end = time.time() + 30
    while time.time() < end:
        n, wcs = cq.poll(1)
        if n > 0:
            return wcs[0]
        time.sleep(0.01)
    return None


a = bytes((i * 167 + 3) & 0xff for i in range(256))
b = bytes((i * 167 + 77) & 0xff for i in range(256))
src.write(a, 256, 0)
dst.write(b, 256, 0)
want = bytes(encode_e4m3(e4m3(b[i]) + e4m3(a[i])) for i in range(256))
wc = write(256, 1)
check('the 256-byte RDMA WRITE completes', wc is not None and wc.status == en('IBV_WC_SUCCESS'), f'wc {wc.status if wc else None}')
got = dst.read(256, 0)
diff = [i for i in range(256) if got[i] != want[i]]
check('the target holds the E4M3 sums of all 256 codes (the table computed here)', not diff,
      f'{len(diff)} differ, first at {diff[:1]}: got {got[diff[0]] if diff else 0:#x} want {want[diff[0]] if diff else 0:#x}')
check('...and not the bytes written (the program ran)', got != a)
i448 = a.index(0x7e) if 0x7e in a else -1
print(f'sample: {b[0]:#04x} + {a[0]:#04x} = {got[0]:#04x} (table {want[0]:#04x}); code 0x7e + {b[i448]:#04x} = {got[i448]:#04x}', flush=True)

before = dst.read(3, 0)
src.write(b'\x01\x02\x03', 3, 0)
wc = write(3, 2)
check('a 3-byte WRITE (dropped by the program) completes with IBV_WC_RETRY_EXC_ERR',
      wc is not None and wc.status == en('IBV_WC_RETRY_EXC_ERR'), f'wc {wc.status if wc else None}')
check('...and wrote nothing', dst.read(3, 0) == before)
sys.exit(fail)
