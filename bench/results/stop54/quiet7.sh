#!/usr/bin/env bash
# The quiet window of this stop: one command after the other, nothing else running.
cd /work/main
set -x
date; uptime
git log --oneline -1
ps -eo pcpu,etime,comm --sort=-pcpu | head -6
B=/work/base-44b2acc
.venv/bin/python bench/hook.py --trees $B,/work/main --names 10,10000,100000 --rounds 3 --portable > /work/benchruns/q7-hook.txt 2>/work/benchruns/q7-hook.err
date
.venv/bin/python bench/cellfirst.py --seconds 3 --blocks 0 --pairs 50 --pin --readers sdk,one-write > /work/benchruns/q7-cellfirst.json 2>/work/benchruns/q7-cellfirst.err
date
.venv/bin/python bench/load.py --kernels 10 > /work/benchruns/q7-load.json 2>/dev/null
date
.venv/bin/python bench/varied.py --seconds 3 --rounds 2 > /work/benchruns/q7-varied.txt 2>/work/benchruns/q7-varied.err
date
.venv/bin/python bench/jupyterhub_paced.py --cells 24 --label quiet > /work/benchruns/q7-paced.txt 2>&1
date
for i in 1 2 3; do .venv/bin/python -m pytest -q -s tests/test_jupyterhub_service_bounds.py -k tarpit > /work/benchruns/q7-tarpit-$i.txt 2>&1; done
date
for i in 2 3; do .venv/bin/python bench/hook.py --trees $B,/work/main --names 10000 --rounds 4 > /work/benchruns/q7-hook$i.txt 2>/work/benchruns/q7-hook$i.err; done
date
.venv/bin/python bench/jupyterhub_paced.py --users 20 50 --cells 24 --label quiet2 > /work/benchruns/q7-paced2.txt 2>&1
date
.venv/bin/python bench/request_ab.py --trees $B,/work/main --rounds 3 --seconds 2 > /work/benchruns/q7-request-ab.txt 2>/dev/null
date; uptime
echo done
