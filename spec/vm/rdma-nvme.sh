#!/bin/bash
# VM test of a kernel RDMA consumer (nvme-rdma to nvmet-rdma in one guest)
# on our device with the stock drivers; rdma_rxe in the same guest as baseline.
# Needs root and the rig's images.
HERE=$(cd "$(dirname "$0")" && pwd)
exec bash "$HERE/with-server.sh" nvme "$HERE/guest-rdma-nvme.sh" 900
