import sys

from nodeagent.daemon import main

sys.exit(main())
