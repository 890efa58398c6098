import sys

from nodeagent.process import main

sys.exit(main(argv=sys.argv[1:]))
