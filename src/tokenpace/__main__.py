from tokenpace.cli.main import main

raise SystemExit(main())
