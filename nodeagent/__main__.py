import sys

from nodeagent.daemon import main

sys.exit(main(argv=sys.argv[1:]))
