#!/usr/bin/env bash
# attnkit: `npm start` — installs what is missing, builds, then runs the case corpus on every available target and
# prints per case the max abs / rel difference of each against the fp64 reference and its time (report/index.html).
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in  # before installing anything
  *" -h "* | *" --help "*)
    echo "Usage: npm start [-- --cases DIR|FILE] [--filter SUBSTR] [--targets id,id] [--threads N] [--repeat N] [--out FILE]"; exit 0 ;;
esac
bash scripts/setup.sh
bash scripts/build.sh
node scripts/compare.mjs "$@"
