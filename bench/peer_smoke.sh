#!/bin/bash
# Runs every peer script of bench/ for a few steps on tiny inputs and checks
# that each prints its figure (bench/peer_smoke.py, which says how). ctest
# runs this as PeerScripts.RunAndPrintTheirFigures (label "peers").
#   bash bench/peer_smoke.sh [DLSCALE_BINARY]
# Debian's interpreter: it sees python3-torch.
exec /usr/bin/python3 "$(dirname "$0")/peer_smoke.py" "$@"
