"""Node facts for G1: what a node really carries (accelerators, drives, RAID, mounts, links, RDMA,
OS and software), parsed by pure functions from the vendor tools' output, collected over an
Executor, and compared with the inventory's expectations."""
