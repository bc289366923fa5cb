# The bench's main.py on the virtual Pico (tests/bench/bench_vpico.py), copied onto the flash
# image in place of firmware/main.py. Kept tiny: the heap is read before anything else is
# loaded, then after `import board_pico` (all of rmcfw from .mpy), as the firmware's own
# main.py would leave it; the rest (the same Board, timed) is tests/bench/vpico_probe.py.
import gc

gc.collect()
_boot_free = gc.mem_free()
import board_pico  # noqa: E402, F401  (after the first reading, on purpose)

gc.collect()
_import_free = gc.mem_free()
import vpico_probe  # noqa: E402

vpico_probe.main(_boot_free, _import_free)
