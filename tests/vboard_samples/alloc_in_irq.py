# Sample: a hard IRQ handler that allocates (a list), which a board refuses. The virtual board
# must report it ("Uncaught exception in IRQ callback handler", MemoryError) and disable it.
import time

import machine

hits = []


def bad(pin):
    hits.append([pin])  # allocates: forbidden in a hard IRQ


p = machine.Pin(10, machine.Pin.IN, machine.Pin.PULL_DOWN)
p.irq(bad, trigger=machine.Pin.IRQ_RISING, hard=True)
time.sleep_ms(100)
print("hits", len(hits), "irq_errors", machine.stats["irq_errors"])
