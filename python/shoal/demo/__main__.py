from shoal.demo import main

raise SystemExit(main())
