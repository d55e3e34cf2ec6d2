#!/bin/bash
# VM test of RDMA with the stock drivers: ibv_devices, port state and GIDs,
# ibv_rc/ud_pingpong, perftest bandwidth and latency (also over rdma_cm),
# atomics, rdma_server/rdma_client, udaddy, rping, UC and SRQ as the provider
# allows, on our device; then the same on rdma_rxe in the same guest.
# Needs root and the rig's images. Figures are TCG figures.
HERE=$(cd "$(dirname "$0")" && pwd)
exec bash "$HERE/with-server.sh" rdma "$HERE/guest-rdma-verbs.sh" 1800
