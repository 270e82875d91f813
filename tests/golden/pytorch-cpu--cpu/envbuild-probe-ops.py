<verbatim copy of envbuild/validate/probes/_probe_ops.py>
