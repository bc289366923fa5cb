"""A roulette computer tried on the wheel (issue 26, docs/security.md): what a hidden device
that clocks the ball and the rotor before « rien ne va plus » wins, by lead and clocking
noise, and the lead that leaves it nothing.

    from rmc.edge.sources import from_sim
    from rmc.edge.report import measure
    src = from_sim(seed=7, spins=1000)
    rep = measure(src.spins, src.geo, src.label)   # EdgeReport
    rep.recommendation.lead_s

Modules: observe (what a device sees: ball passes, rotor mark passes), frames (the same from a
recording's frames), physics (the ball's and the rotor's fits), attack (clocks, prediction),
scatter (what the training spins teach), evaluate (cuts, bets, returns, intervals), calls
(the firmware's own calls), report (the figures and the recommendation), plots.
"""
