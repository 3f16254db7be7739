#!/usr/bin/env bash
# Sweeps events x periods x workers x migration modes: filled by the issue
# "run-matrix.sh and benches: sweep configurations, and prove the speed".
echo "run-matrix.sh: not implemented yet (see the run-matrix issue)" >&2
exit 125
