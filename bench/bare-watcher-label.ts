/** The one label the P1 floor watcher patches onto each new Node. */
export const SEEN_LABEL = 'bench.nodeflavor.io/seen';
