#!/bin/bash
# Runs inside the guest (4 vCPUs): rocm-ernic's in-process S3 store at
# 192.168.200.1:9000 (bucket ernic), reached over the ionic netdev with
# nothing but curl: the store answers ARP and ping itself. Then a 64 MiB
# multipart upload with Content-MD5 on every part, and the token path from
# pyverbs (/job/guest-s3-rdma.py). Prints ok/FAIL lines and a few figures.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
S=192.168.200.1 U=http://192.168.200.1:9000/ernic
modprobe -a ionic ionic_rdma || { echo "FAIL - modules"; exit 1; }
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f $d/device/driver 2>/dev/null)")" = "$1" ] && basename $d; done; }
for _ in $(seq 50); do nic=$(netdev_of ionic); [ -n "$nic" ] && break; sleep 0.1; done
ip addr add 192.168.200.2/24 dev $nic; ip link set $nic up; sleep 2
check "ping $S (the store answers ICMP echo)" "ping -c 2 -W 3 $S > /tmp/ping 2>&1"
echo "ip neigh: $(ip neigh show $S)"
check "ARP resolved the store to 02:53:c0:a8:c8:01 (02:53:<ipv4>)" "ip neigh show $S | grep -q 02:53:c0:a8:c8:01"

# curl: PUT, GET, HEAD, a listing, ranged GET, DELETE.
head -c 300000 /dev/urandom > /tmp/obj
md5=$(md5sum < /tmp/obj | cut -c1-32)
code=$(curl -s -o /dev/null -D /tmp/put.h -w '%{http_code}' -T /tmp/obj "$U/dir/obj")
check "curl PUT 300000 bytes: 200, ETag the MD5 ($md5)" "[ $code = 200 ] && grep -qi '^etag: \"$md5\"' /tmp/put.h"
code=$(curl -s -o /tmp/back -w '%{http_code}' "$U/dir/obj")
check "curl GET: 200, the same bytes" "[ $code = 200 ] && cmp -s /tmp/obj /tmp/back"
curl -s -I "$U/dir/obj" > /tmp/head.h
check "curl HEAD: 200, Content-Length 300000, the ETag" "grep -q '^HTTP/1.1 200' /tmp/head.h && grep -qi '^content-length: 300000' /tmp/head.h && grep -qi \"^etag: \\\"$md5\\\"\" /tmp/head.h"
code=$(curl -s -o /tmp/range -D /tmp/range.h -w '%{http_code}' -r 1000-66535 "$U/dir/obj")
dd if=/tmp/obj of=/tmp/range.want bs=1 skip=1000 count=65536 status=none
check "curl ranged GET bytes=1000-66535: 206, Content-Range, the right 65536 bytes" "[ $code = 206 ] && grep -qi '^content-range: bytes 1000-66535/300000' /tmp/range.h && cmp -s /tmp/range /tmp/range.want"
code=$(curl -s -o /dev/null -w '%{http_code}' -r 400000- "$U/dir/obj")
check "curl ranged GET past the end: 416" "[ $code = 416 ]"
curl -s "$U?list-type=2&prefix=dir/" > /tmp/list.xml
check "ListObjectsV2 prefix=dir/ lists dir/obj with its size" "grep -q '<Key>dir/obj</Key>' /tmp/list.xml && grep -q '<Size>300000</Size>' /tmp/list.xml"
for i in 1 2 3 4; do (curl -s --max-time 120 -o /tmp/par.$i -w '%{http_code} %{size_download}' "$U/dir/obj" > /tmp/par.$i.w; echo " exit $?" >> /tmp/par.$i.w) & done; wait
check "four curl GETs at once (four connections), all the same bytes" "cmp -s /tmp/obj /tmp/par.1 && cmp -s /tmp/obj /tmp/par.2 && cmp -s /tmp/obj /tmp/par.3 && cmp -s /tmp/obj /tmp/par.4"
for i in 1 2 3 4; do cmp -s /tmp/obj /tmp/par.$i || echo "  GET $i: $(cat /tmp/par.$i.w); $(cmp /tmp/obj /tmp/par.$i 2>&1 | head -1)"; done
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$U/dir/obj")
check "curl DELETE: 204" "[ $code = 204 ]"
code=$(curl -s -o /tmp/err.xml -w '%{http_code}' "$U/dir/obj")
check "GET after DELETE: 404 NoSuchKey in S3 XML" "[ $code = 404 ] && grep -q '<Code>NoSuchKey</Code>' /tmp/err.xml"
code=$(curl -s -o /tmp/err.xml -w '%{http_code}' "$U/dir/obj?tagging")
check "an unsupported call (GetObjectTagging): 501 NotImplemented in S3 XML" "[ $code = 501 ] && grep -q '<Code>NotImplemented</Code>' /tmp/err.xml"

# Multipart: 64 MiB in four 16 MiB parts, each with Content-MD5; the ETag is the MD5 of the parts' MD5s, -4.
head -c 64M /dev/urandom > /tmp/big
sum=$(sha256sum < /tmp/big | cut -c1-64)
split -b 16M -d -a 1 /tmp/big /tmp/part.
id=$(curl -s -X POST "$U/big?uploads" | sed -n 's:.*<UploadId>\([^<]*\)</UploadId>.*:\1:p')
check "CreateMultipartUpload: an UploadId" "[ -n '$id' ]"
t0=$(date +%s.%N)
xml='<CompleteMultipartUpload>'
for n in 1 2 3 4; do
  f=/tmp/part.$((n - 1))
  b64=$(python3 -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.md5(open(sys.argv[1], "rb").read()).digest()).decode())' $f)
  code=$(curl -s -o /dev/null -D /tmp/part.h -w '%{http_code}' -T $f -H "Content-MD5: $b64" "$U/big?partNumber=$n&uploadId=$id")
  etag=$(sed -n 's/^[Ee][Tt][Aa][Gg]: *\(".*"\).*/\1/p' /tmp/part.h | tr -d '\r')
  [ $code = 200 ] || { echo "FAIL - UploadPart $n: $code"; fail=1; }
  xml+="<Part><PartNumber>$n</PartNumber><ETag>$etag</ETag></Part>"
done
t1=$(date +%s.%N)
xml+='</CompleteMultipartUpload>'
check "ListParts: four parts of 16777216 bytes" "[ \$(curl -s '$U/big?uploadId=$id' | grep -o '<Size>16777216</Size>' | wc -l) = 4 ]"
b64=$(python3 -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.md5(open(sys.argv[1], "rb").read()).digest()).decode())' /tmp/part.0)
code=$(curl -s -o /tmp/err.xml -w '%{http_code}' -T /tmp/part.1 -H "Content-MD5: $b64" "$U/big?partNumber=5&uploadId=$id")
check "a part whose Content-MD5 does not match: 400 BadDigest" "[ $code = 400 ] && grep -q '<Code>BadDigest</Code>' /tmp/err.xml"
want=$(python3 -c 'import hashlib, sys; print(hashlib.md5(b"".join(hashlib.md5(open(f, "rb").read()).digest() for f in sys.argv[1:])).hexdigest() + "-4")' /tmp/part.0 /tmp/part.1 /tmp/part.2 /tmp/part.3)
curl -s -X POST -d "$xml" "$U/big?uploadId=$id" > /tmp/complete.xml
check "CompleteMultipartUpload: ETag $want" "grep -q -- '$want' /tmp/complete.xml"
t2=$(date +%s.%N)
code=$(curl -s -o /tmp/big.back -w '%{http_code}' "$U/big")
t3=$(date +%s.%N)
check "the 64 MiB object read back: sha256 $sum" "[ $code = 200 ] && [ \"\$(sha256sum < /tmp/big.back | cut -c1-64)\" = $sum ]"
echo "mp64 sha256 $sum"
echo "figure: 64 MiB multipart upload $(awk "BEGIN { printf \"%.1f\", 64 / ($t1 - $t0) }") MiB/s, GET $(awk "BEGIN { printf \"%.1f\", 64 / ($t3 - $t2) }") MiB/s (curl over the emulated wire)"
# A 64 MiB object in one PUT and one GET (nothing else timed), at MTU 1500 and again at MTU 9000, where the
# store sends segments as large as the guest's receive buffers take. The offloads the driver was granted first.
echo "ethtool -k $nic: $(ethtool -k $nic 2>/dev/null | grep -E '^(tcp-segmentation-offload|tx-checksumming|rx-checksumming|scatter-gather):' | tr -s ' \n' ' ')"
rm -f /tmp/part.*
for mtu in 1500 9000; do
  ip link set $nic mtu $mtu
  t0=$(date +%s.%N)
  code=$(curl -s -o /dev/null -w '%{http_code}' -T /tmp/big "$U/one$mtu")
  t1=$(date +%s.%N)
  code2=$(curl -s -o /tmp/big.back -w '%{http_code}' "$U/one$mtu")
  t2=$(date +%s.%N)
  check "MTU $mtu: 64 MiB PUT and GET in one request each, the same bytes back" "[ $code = 200 ] && [ $code2 = 200 ] && cmp -s /tmp/big /tmp/big.back"
  echo "figure: MTU $mtu 64 MiB PUT $(awk "BEGIN { printf \"%.1f\", 64 / ($t1 - $t0) }") MiB/s, GET $(awk "BEGIN { printf \"%.1f\", 64 / ($t2 - $t1) }") MiB/s (curl over the emulated wire)"
done
ip link set $nic mtu 1500
rm -f /tmp/big /tmp/big.back

# The token path from pyverbs.
python3 /job/guest-s3-rdma.py || fail=1
exit $fail
