// cluster-key-slot ships no types: the one function sluice uses (Redis Cluster's CRC16 slot of a key, 0 to 16383).
declare module "cluster-key-slot" {
  export default function keySlot(key: string): number;
}
