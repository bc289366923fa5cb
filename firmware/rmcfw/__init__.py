# Portable core of the table firmware: no `machine`, no pins. Runs unchanged under
# MicroPython (on the board, and on the WebAssembly port in tests) and CPython (the host
# imports it to replay sensor traces through the very code that runs on the table).
