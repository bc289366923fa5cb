from rmc.cli import main

raise SystemExit(main())
