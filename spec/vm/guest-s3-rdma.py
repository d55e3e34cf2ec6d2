#!/usr/bin/python3
# Runs inside the guest (spec/vm/s3.sh): the S3-over-RDMA token path from a
# pyverbs client, as hipObject does it. Two 1 MiB buffers are registered on
# ionic_0; a PUT with x-amz-rdma-token makes the store RDMA-READ the object
# out of one, a GET with a token makes it RDMA-WRITE an object into the other.
# Everything is checked byte for byte, against the body path too. Then the
# refusals: key 0, an MR without remote write, a range past the MR, a token
# that is not a token. Prints ok/FAIL lines; exits 1 on any FAIL.
import hashlib
import http.client
import os
import struct
import sys

from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
import pyverbs.libibverbs_enums as e

HOST, PORT, BUCKET = '192.168.200.1', 9000, 'ernic'
MIB = 1 << 20
failed = False


def check(what, cond, detail=''):
    global failed
    print(('ok   - ' if cond else 'FAIL - ') + what + (f' ({detail})' if detail and not cond else ''), flush=True)
    if not cond:
        failed = True


def token(mr, addr=None, length=None, rkey=None, gid=b'\0' * 16):
    # docs/s3.md, "The token path": 44 bytes, little-endian:
    # transport (1 = RC), QPN, GID, rkey, remote address, length, port, LID.
    return struct.pack('<BI16sIQQBH', 1, 0, gid,
                       mr.rkey if rkey is None else rkey,
                       mr.buf if addr is None else addr,
                       mr.length if length is None else length, 1, 0).hex()


def request(method, key, headers=None, body=None):
    c = http.client.HTTPConnection(HOST, PORT, timeout=300)
    c.request(method, f'/{BUCKET}/{key}', body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def access(name):
    # Newer pyverbs keep the flags in IntEnum classes (ibv_access_flags), older ones at module level.
    return int(getattr(e, name, None) or getattr(e.ibv_access_flags, name))


ctx = Context(name='ionic_0')
pd = PD(ctx)
rw = access('IBV_ACCESS_LOCAL_WRITE') | access('IBV_ACCESS_REMOTE_WRITE') | access('IBV_ACCESS_REMOTE_READ')
src = MR(pd, MIB, rw)
dst = MR(pd, MIB, rw)
local_only = MR(pd, MIB, access('IBV_ACCESS_LOCAL_WRITE'))
try:
    gid = bytes.fromhex(str(ctx.query_gid(1, 0)).replace(':', ''))
except Exception:  # the GID only fills the token's GID field; the store does not use it
    gid = b''
gid = gid if len(gid) == 16 else b'\0' * 16
print(f'MRs: src rkey {src.rkey:#x} at {src.buf:#x}, dst rkey {dst.rkey:#x} at {dst.buf:#x}, gid {ctx.query_gid(1, 0)}', flush=True)

# PUT by token: the store reads 1 MiB out of src.
pattern = os.urandom(MIB)
src.write(pattern, MIB, 0)
st, h, _ = request('PUT', 'rdma/put-by-token', {'x-amz-rdma-token': token(src, gid=gid)})
check('PUT by token: 200, x-amz-rdma-bytes 1048576, x-amz-rdma-reply 200:<88 hex>',
      st == 200 and h.get('x-amz-rdma-bytes') == str(MIB) and h.get('x-amz-rdma-reply', '').startswith('200:')
      and len(h.get('x-amz-rdma-reply', '')) == 4 + 88, f'{st} {h}')
check('PUT by token: the ETag is the MD5 of the buffer', h.get('etag') == f'"{hashlib.md5(pattern).hexdigest()}"', h.get('etag'))
st, _, body = request('GET', 'rdma/put-by-token')
check('PUT by token: the object read back through the body is the buffer, byte for byte', st == 200 and body == pattern,
      f'{st}, {len(body)} bytes')

# GET by token: an object uploaded in the body lands in dst.
obj = os.urandom(MIB)
st, _, _ = request('PUT', 'rdma/get-by-token', body=obj)
check('PUT in the body (1 MiB)', st == 200, str(st))
dst.write(b'\0' * MIB, MIB, 0)
st, h, body = request('GET', 'rdma/get-by-token', {'x-amz-rdma-token': token(dst, gid=gid)})
check('GET by token: 200, no body, x-amz-rdma-bytes 1048576',
      st == 200 and body == b'' and h.get('x-amz-rdma-bytes') == str(MIB) and h.get('x-amz-rdma-reply', '').startswith('200:'), f'{st} {h}')
check('GET by token: dst holds the object, byte for byte', dst.read(MIB, 0) == obj)
st, h, _ = request('GET', 'rdma/put-by-token', {'x-amz-rdma-token': token(dst, gid=gid)})
check('GET by token of the object PUT by token: dst equals src', st == 200 and dst.read(MIB, 0) == pattern, str(st))

# The <token>:<addr>:<len> form and a ranged GET: 8 KiB of the object at dst + 4096.
dst.write(b'\0' * MIB, MIB, 0)
hdr = f'{token(dst, gid=gid)}:{dst.buf + 4096:x}:{8192:x}'
st, h, _ = request('GET', 'rdma/get-by-token', {'x-amz-rdma-token': hdr, 'Range': 'bytes=100000-'})
got = dst.read(MIB, 0)
check('ranged GET by <token>:<addr>:<len>: 206, 8192 bytes at dst+4096, nothing else touched',
      st == 206 and h.get('x-amz-rdma-bytes') == '8192' and got[4096:4096 + 8192] == obj[100000:100000 + 8192]
      and got[:4096] == b'\0' * 4096 and got[4096 + 8192:] == b'\0' * (MIB - 4096 - 8192), f'{st} {h.get("x-amz-rdma-bytes")}')

# Refusals: nothing moves, the reply says so, and the store stays up.
before = dst.read(MIB, 0)
st, h, body = request('GET', 'rdma/get-by-token', {'x-amz-rdma-token': token(dst, rkey=0, gid=gid)})
check('key 0 refused: 403 AccessDenied, x-amz-rdma-reply 403', st == 403 and h.get('x-amz-rdma-reply') == '403' and b'AccessDenied' in body, f'{st} {h}')
st, h, _ = request('GET', 'rdma/get-by-token', {'x-amz-rdma-token': token(local_only, gid=gid)})
check('an MR without remote write refused for GET (403)', st == 403 and h.get('x-amz-rdma-reply') == '403', f'{st}')
st, h, _ = request('GET', 'rdma/get-by-token', {'x-amz-rdma-token': token(dst, addr=dst.buf + MIB - 100, length=4096, gid=gid)})
check('a range past the end of the MR refused (403)', st == 403, f'{st}')
st, h, _ = request('PUT', 'rdma/refused', {'x-amz-rdma-token': token(local_only, gid=gid)})
check('an MR without remote read refused for PUT (403), no object made',
      st == 403 and request('HEAD', 'rdma/refused')[0] == 404, f'{st}')
st, h, body = request('GET', 'rdma/get-by-token', {'x-amz-rdma-token': 'zz' * 44})
check('a malformed token: 400 InvalidArgument', st == 400 and b'InvalidArgument' in body, f'{st}')
check('after the refusals dst is untouched', dst.read(MIB, 0) == before)

sys.exit(1 if failed else 0)
