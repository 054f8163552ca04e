from vx.cli import main

raise SystemExit(main())
