#!/bin/sh
# tls_certs.sh DIR [PASSPHRASE] - throwaway certificates for the TLS tests
# of the Cassandra store, made with the openssl command (P-256 keys, valid
# two days unless said otherwise). Fails when openssl is missing.
#
#   ca.pem ca.key                the test CA
#   server.pem server.key        CA-signed, for DNS:localhost and IP:127.0.0.1
#   wronghost.pem wronghost.key  CA-signed, for DNS:other.example only
#   expired.pem expired.key      CA-signed, for localhost, expired in 2020
#   rogue-ca.pem                 a CA nobody trusts, and
#   rogue.pem rogue.key          a localhost certificate it signed
#   client.pem client.key        CA-signed client certificate (clientAuth)
#   rogue-client.pem .key        a client certificate rogue-ca signed
#   client-enc.key               client.key encrypted with PASSPHRASE
#                                (when given)
#   inter.pem inter.key          an intermediate CA the test CA signed, and
#   chained.pem chained.key      a localhost certificate it signed;
#   chain.pem                    chained.pem then inter.pem (a PEM chain)
#   expired-client.pem .key      CA-signed client certificate, expired in 2020
set -eu
dir=${1:?usage: tls_certs.sh DIR [PASSPHRASE]}
pass=${2:-}
command -v openssl >/dev/null 2>&1 || {
  echo "tls_certs: the openssl command is needed (scripts/deps.sh installs it)" >&2
  exit 1
}
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() { # NAME CN
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
}
csr() { # NAME CN SAN EKU
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2" \
    ${3:+-addext "subjectAltName=$3"} -addext "extendedKeyUsage=$4"
}
sign() { # NAME CA [DAYS]
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" \
    -CAcreateserial -days "${3:-2}" -copy_extensions copy -out "$1.pem" 2>/dev/null
}
ca ca "unico test CA"
csr server localhost "DNS:localhost,IP:127.0.0.1" serverAuth && sign server ca
csr wronghost other.example "DNS:other.example" serverAuth && sign wronghost ca
csr client unico-client "" clientAuth && sign client ca
ca rogue-ca "rogue CA"
csr rogue localhost "DNS:localhost,IP:127.0.0.1" serverAuth && sign rogue rogue-ca
csr rogue-client unico-client "" clientAuth && sign rogue-client rogue-ca
# expired: openssl x509 cannot set dates in the past; openssl ca can
csr expired localhost "DNS:localhost,IP:127.0.0.1" serverAuth
mkdir -p ca-db
: >ca-db/index.txt
echo 1000 >ca-db/serial
cat >ca.cnf <<EOF
[ca]
default_ca = d
[d]
database = ca-db/index.txt
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = p
copy_extensions = copy
[p]
commonName = supplied
EOF
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
  -out expired.pem -notext -startdate 20200101000000Z -enddate 20200102000000Z 2>/dev/null
csr expired-client unico-expired-client "" clientAuth
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in expired-client.csr \
  -out expired-client.pem -notext -startdate 20200101000000Z -enddate 20200102000000Z 2>/dev/null
# an intermediate CA, and a server certificate served with its chain
key inter.key
openssl req -new -key inter.key -out inter.csr -subj "/CN=unico test intermediate" \
  -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
  -addext "keyUsage=critical,keyCertSign,cRLSign"
sign inter ca
csr chained localhost "DNS:localhost,IP:127.0.0.1" serverAuth && sign chained inter
cat chained.pem inter.pem >chain.pem
if [ -n "$pass" ]; then
  openssl pkcs8 -topk8 -in client.key -out client-enc.key -passout "pass:$pass" \
    -v2 aes-256-cbc
fi
