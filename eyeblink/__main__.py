from eyeblink.cli import main

raise SystemExit(main())
