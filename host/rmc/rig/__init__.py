"""Hardware-in-the-loop rig: plays a trace's raw sensor edges into a table board (docs/rig.md).

The rig takes the place of the wheel's sensors. It drives the board's sensor harness through
pin backends (Blinka `digitalio` with MCP23017 expanders for the pockets, a pulse-generator
Pico for timing-exact ball and rotor pulses, or the virtual board), reads the board's frames
at the same time, records them into a trace and compares the board's results, voids, faults
and « rien ne va plus » instants with the trace's ground truth.

Modules: `pins` (rig pin map, electrical levels), `edges` (the trace's edges and truth),
`backends` (pin backends), `pulsegen` (the pulse generator's host side), `player` (real-time
playback), `link` (frame reader), `compare` (results against truth), `selftest`, `jitter`,
`virtual` (the virtual board backend), `run` (a whole rig run).
"""
