"""What the scenario tests share: workspaces and real vx runs (`workspace`), processes,
the store, real servers (remote cache, REAPI, npm packages) and the key fuzzer's oracle."""
